//! The wire format: frames round-trip, and no byte sequence makes the decoder panic.

use phasedb_net::wire::{
    HEADER, MAX_FRAME, WireError, decode_batch, decode_hello, encode_frame, hello_frame,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
enum Msg {
    Get { rid: u64, keys: Vec<u64> },
    Reply { rid: u64, values: Vec<Vec<u8>> },
    Ping,
}

fn sample() -> Vec<Msg> {
    vec![
        Msg::Get {
            rid: 7,
            keys: vec![1, 2, 3],
        },
        Msg::Ping,
        Msg::Reply {
            rid: u64::MAX,
            values: vec![vec![], vec![0xff; 300]],
        },
    ]
}

#[test]
fn a_batch_of_messages_round_trips_through_one_frame() {
    let frame = encode_frame(&sample()).unwrap();
    let len = u32::from_be_bytes(frame[..HEADER].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - HEADER);
    let mut out: Vec<Msg> = Vec::new();
    decode_batch(&frame[HEADER..], &mut out).unwrap();
    assert_eq!(out, sample());
}

#[test]
fn truncated_and_garbage_frames_are_errors_not_panics() {
    let frame = encode_frame(&sample()).unwrap();
    let payload = &frame[HEADER..];
    for cut in 1..payload.len() {
        let mut out: Vec<Msg> = Vec::new();
        let r = decode_batch(&payload[..cut], &mut out);
        if let Err(WireError::Decode { offset, len, .. }) = &r {
            assert!(*offset < *len);
        }
        assert!(out.len() <= 3);
    }
    let mut rng = SmallRng::seed_from_u64(42);
    let mut errors = 0;
    for _ in 0..20_000 {
        let n = rng.random_range(0..64);
        let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        let mut out: Vec<Msg> = Vec::new();
        errors += decode_batch(&bytes, &mut out).is_err() as u32;
    }
    assert!(
        errors > 10_000,
        "random bytes should mostly fail to decode, {errors} did"
    );
    let huge = vec![0u8; MAX_FRAME + 1];
    let mut out: Vec<Msg> = Vec::new();
    assert!(matches!(
        decode_batch(&huge, &mut out),
        Err(WireError::TooLarge(_))
    ));
}

#[test]
fn a_length_prefix_claiming_gigabytes_does_not_allocate_them() {
    // A Vec<u64> whose varint length says 2^62 elements, followed by nothing.
    let bytes = [0u8, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f];
    let mut out: Vec<Msg> = Vec::new();
    assert!(decode_batch(&bytes, &mut out).is_err());
}

#[test]
fn hello_names_the_sender_and_rejects_strangers() {
    let h = hello_frame(12345);
    assert_eq!(decode_hello(&h[HEADER..]).unwrap(), 12345);
    assert!(matches!(
        decode_hello(b"GET / HTTP/1.1"),
        Err(WireError::BadHello(_))
    ));
    let mut wrong_version = h[HEADER..].to_vec();
    wrong_version[4] = 99;
    let e = decode_hello(&wrong_version).unwrap_err();
    assert!(e.to_string().contains("unsupported wire version"), "{e}");
}
