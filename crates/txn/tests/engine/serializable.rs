//! Randomised, contended workloads (few keys, several threads, reads, read-modify-writes, blind writes,
//! inserts, deletes, scans and user aborts) recorded and judged by the serializability checker.
//! A failure names the seed; `PHASEDB_SEED=<seed>` replays that seed.

use crate::common::{Mix, run, seeds};
use phasedb_check::{Anomaly, check_serializable};
use phasedb_txn::{
    Adaptive, NoCc, Occ, Protocol, SwissTm, TicToc, TwoPlBlocking, TwoPlNoWait, TwoPlWaitDie,
};

const MIX: Mix = Mix {
    keys: 12,
    scans: true,
    yield_ratio: 0.0,
    adds: 0.1,
};

fn assert_serializable<P: Protocol>(fine: bool) {
    for seed in seeds(&[1, 2, 3, 4, 5, 6]) {
        let (h, _) = run::<P>(seed, 4, 1500, fine, MIX);
        assert!(
            h.len() > 4000,
            "seed {seed}: only {} transactions committed",
            h.len()
        );
        if let Err(a) = check_serializable(&h) {
            if let Anomaly::Cycle(c) = &a {
                for id in c.txns() {
                    let t = h
                        .txns
                        .iter()
                        .find(|t| t.id == id)
                        .expect("cycle members are in the history");
                    eprintln!("T{id}: reads {:?} writes {:?}", t.reads, t.writes);
                }
            }
            panic!(
                "{} not serializable with seed {seed} (fine = {fine}): {a}",
                P::NAME
            );
        }
    }
}

#[test]
fn occ_is_serializable_coarse() {
    assert_serializable::<Occ>(false);
}

#[test]
fn occ_is_serializable_fine() {
    assert_serializable::<Occ>(true);
}

#[test]
fn two_phase_locking_is_serializable() {
    for fine in [false, true] {
        assert_serializable::<TwoPlNoWait>(fine);
        assert_serializable::<TwoPlWaitDie>(fine);
        assert_serializable::<TwoPlBlocking>(fine);
    }
}

#[test]
fn swisstm_is_serializable() {
    assert_serializable::<SwissTm>(false);
    assert_serializable::<SwissTm>(true);
}

#[test]
fn adaptive_is_serializable() {
    assert_serializable::<Adaptive>(false);
    assert_serializable::<Adaptive>(true);
}

#[test]
fn tictoc_is_serializable() {
    assert_serializable::<TicToc>(false);
    assert_serializable::<TicToc>(true);
}

#[test]
fn checker_catches_nocc_under_contention() {
    let mut caught = 0;
    let seeds = seeds(&[11, 12, 13, 14]);
    for &seed in &seeds {
        let (h, _) = run::<NoCc>(
            seed,
            4,
            3000,
            false,
            Mix {
                yield_ratio: 0.05,
                ..MIX
            },
        );
        match check_serializable(&h) {
            Err(Anomaly::Cycle(_) | Anomaly::WriteFork { .. }) => caught += 1,
            Err(other) => panic!("seed {seed}: unexpected anomaly kind {other}"),
            Ok(_) => {}
        }
    }
    assert!(
        caught > 0,
        "no anomaly found in nocc histories for seeds {seeds:?}"
    );
}
