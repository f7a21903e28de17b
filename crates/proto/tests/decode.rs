//! The decoder never panics: arbitrary bytes, and valid frames cut short or corrupted, give a frame,
//! "need more bytes" or an error. This is the protocol's fuzz target, run as a property test (cargo
//! fuzz needs a nightly toolchain); `PROPTEST_CASES=1000000 cargo test --release -p phasedb-proto`
//! runs it longer.

use phasedb_proto::*;
use proptest::prelude::*;

/// Feeds `bytes` through a frame reader in chunks and decodes every payload as a request, a
/// response and a hello; returns how many frames decoded as requests.
fn feed(bytes: &[u8], chunk: usize, limit: usize) -> usize {
    let mut reader = FrameReader::new(limit);
    let mut requests = 0;
    for part in bytes.chunks(chunk.max(1)) {
        reader.extend(part);
        loop {
            match reader.next_frame() {
                Ok(Some(payload)) => {
                    let payload = payload.to_vec();
                    requests += decode_request(&payload).is_ok() as usize;
                    let _ = decode_response(&payload);
                    let _ = decode::<Hello>(&payload);
                    let _ = decode::<HelloReply>(&payload);
                }
                Ok(None) => break,
                Err(_) => return requests,
            }
        }
    }
    requests
}

fn sample_request(key: u64, n: u8) -> Request {
    match n % 5 {
        0 => Request::Execute(vec![
            Op::Get {
                table: 1,
                key,
                columns: vec![0, 2],
            },
            Op::Put {
                table: 1,
                key,
                values: vec![(0, Value::I64(-5)), (1, Value::Bytes(vec![n; 12]))],
            },
            Op::Apply {
                table: 0,
                key,
                column: 3,
                op: Arith::Max,
                arg: 7,
                commute: true,
            },
            Op::Ordered {
                table: 2,
                key,
                column: 1,
                op: if n.is_multiple_of(2) {
                    OrderedOp::OPut
                } else {
                    OrderedOp::TopK
                },
                order: -(key as i64),
                value: vec![n; 3],
            },
        ]),
        1 => Request::CreateTable(TableDef {
            name: "t".into(),
            columns: vec![
                ColumnDef {
                    name: "c".into(),
                    kind: ColumnKind::Bounded(40),
                    group: 1,
                },
                ColumnDef {
                    name: "best".into(),
                    kind: ColumnKind::TopK { k: n, n: 8 },
                    group: 0,
                },
            ],
            capacity: key,
            ordered: true,
        }),
        2 => Request::Statement {
            txn: key,
            op: Op::Scan {
                table: 2,
                lo: key,
                hi: u64::MAX,
                limit: 10,
                columns: vec![],
            },
        },
        3 => Request::Call {
            name: "ycsb".into(),
            args: vec![Value::U64(key), Value::F64(0.5)],
        },
        _ => Request::Commit { txn: key },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512), chunk in 1usize..64) {
        feed(&bytes, chunk, 256);
    }

    #[test]
    fn corrupted_and_truncated_frames_never_panic_and_round_trips_hold(
        key in any::<u64>(), n in any::<u8>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), cut in any::<usize>()
    ) {
        let req = sample_request(key, n);
        let mut frame = Vec::new();
        encode_request(&mut frame, key, &req);
        // The frame decodes to what was encoded.
        let mut reader = FrameReader::new(DEFAULT_MAX_FRAME);
        reader.extend(&frame);
        let payload = reader.next_frame().unwrap().unwrap().to_vec();
        prop_assert_eq!(decode_request(&payload).unwrap(), (key, req));
        // Corrupted bytes and a cut-short frame decode to something or to an error, never a panic.
        let mut bad = frame.clone();
        for (at, b) in flips {
            let i = at % bad.len();
            bad[i] ^= b;
        }
        feed(&bad, 7, DEFAULT_MAX_FRAME);
        let cut = cut % frame.len();
        prop_assert_eq!(feed(&frame[..cut], 3, DEFAULT_MAX_FRAME), 0);
    }
}

#[test]
fn a_length_above_the_limit_is_refused_before_its_bytes_arrive() {
    let mut reader = FrameReader::new(1024);
    reader.extend(&(1025u32).to_be_bytes());
    assert_eq!(
        reader.next_frame(),
        Err(DecodeError::TooLarge {
            len: 1025,
            limit: 1024
        })
    );
}

#[test]
fn trailing_bytes_after_a_message_are_malformed() {
    let mut frame = Vec::new();
    encode_request(&mut frame, 9, &Request::Ping);
    let mut payload = frame[HEADER..].to_vec();
    payload.push(0);
    assert!(matches!(
        decode_request(&payload),
        Err(DecodeError::Malformed(_))
    ));
}

/// The examples of `docs/wire-protocol.md`, byte for byte.
#[test]
fn the_documented_example_frames_are_what_the_encoder_writes() {
    let mut ping = Vec::new();
    encode_request(&mut ping, 1, &Request::Ping);
    assert_eq!(ping, [0, 0, 0, 2, 1, 0]);
    let mut get = Vec::new();
    encode_request(
        &mut get,
        2,
        &Request::Execute(vec![Op::Get {
            table: 0,
            key: 300,
            columns: vec![],
        }]),
    );
    assert_eq!(get, [0, 0, 0, 8, 2, 6, 1, 0, 0, 0xac, 2, 0]);
}
