//! `rubis`: the RUBiS auction site, its bidding mix and a mix of half StoreBids on zipfian items,
//! with StoreBid, StoreComment and StoreItem written with splittable operations.

use phasedb_workloads::rubis::{Rubis, RubisConfig, RubisMix};

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::{Finish, PHASE, common_setup, measure, num, options, point, protocols, sweep};

const PAPER: &str = "On RUBiS-B, the standard bidding mix, Doppel gains nothing over OCC (there is \
little contention). On RUBiS-C, where half the transactions bid on items chosen with zipf alpha \
up to 1.8, Doppel splits the popular auctions' metadata (max bid, max bidder, bid count, bid \
list) and reaches about 3x OCC and 6x 2PL at alpha 1.8 on 20 cores (Figure 14).";

/// x of the RUBiS-B points (RUBiS-C points use their alpha).
const BIDDING_X: f64 = -1.0;

fn config(s: &Settings, mix: RubisMix, alpha: f64) -> RubisConfig {
    let mut c = RubisConfig {
        mix,
        alpha,
        ..RubisConfig::default()
    };
    if s.quick {
        c.users = 2_000;
        c.items = 1_000;
        c.bids_per_item = 1;
    }
    c
}

fn tput(rows: &[Row], p: &str, mix: &str, x: f64) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.ok() && r.param("protocol") == Some(p) && r.param("mix") == Some(mix) && r.x == x
        })
        .map(|r| r.metrics.throughput)
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let alphas: &[f64] = if s.quick {
        &[1.8]
    } else {
        &[0.0, 0.6, 1.0, 1.4, 1.8]
    };
    let threads = s.threads_max();
    let mut points = Vec::new();
    let mut cases = vec![(RubisMix::Bidding, 0.0, BIDDING_X)];
    cases.extend(alphas.iter().map(|&a| (RubisMix::Contended, a, a)));
    for (mix, alpha, x) in cases {
        for p in protocols(s, &["doppel", "occ", "2pl"]) {
            let cfg = config(s, mix, alpha);
            cfg.validate()?;
            let opts = options(s, threads, PHASE);
            let p2 = p.clone();
            points.push(point(
                &p,
                x,
                vec![("mix", mix.name().into()), ("alpha", alpha.to_string())],
                move || measure(&p2, Rubis::new(cfg.clone()), &opts),
            ));
        }
    }
    let rows = sweep(s, points);
    let b = tput(&rows, "doppel", "b", BIDDING_X)
        .zip(tput(&rows, "occ", "b", BIDDING_X))
        .and_then(|(d, o)| ratio(d, o));
    let high = *alphas.last().expect("alphas");
    let c_occ = tput(&rows, "doppel", "c", high)
        .zip(tput(&rows, "occ", "c", high))
        .and_then(|(d, o)| ratio(d, o));
    let c_2pl = tput(&rows, "doppel", "c", high)
        .zip(tput(&rows, "2pl", "c", high))
        .and_then(|(d, o)| ratio(d, o));
    let split = rows
        .iter()
        .find(|r| {
            r.param("protocol") == Some("doppel") && r.param("mix") == Some("c") && r.x == high
        })
        .and_then(|r| num(r, "split_records"));
    let claims = vec![
        Claim {
            statement: "on RUBiS-B Doppel is within 10% of OCC".into(),
            paper: "no gain (and no loss) on the bidding mix".into(),
            measured: format!("doppel/occ {}", times(b)),
            verdict: b.map_or(Verdict::NotChecked("doppel or occ missing".into()), |r| {
                Verdict::from_bool((0.9..=1.1).contains(&r))
            }),
        },
        Claim {
            statement: format!(
                "on RUBiS-C at alpha {high} Doppel splits auction metadata and is not below OCC \
                 or 2PL"
            ),
            paper: "~3x OCC and ~6x 2PL at alpha 1.8 on 20 cores".into(),
            measured: format!(
                "doppel/occ {}, doppel/2pl {}, most records split at once {}{}",
                times(c_occ),
                times(c_2pl),
                split.map_or("n/a".into(), |x| format!("{x:.0}")),
                super::flip_note(&[c_occ, c_2pl], 1.0)
            ),
            verdict: match (c_occ, c_2pl, split) {
                (Some(o), Some(l), Some(k)) => Verdict::from_bool(o >= 1.0 && l >= 1.0 && k >= 1.0),
                _ => Verdict::NotChecked("doppel, occ or 2pl missing".into()),
            },
        },
    ];
    let c = config(s, RubisMix::Contended, high);
    let mut setup = vec![format!(
        "RUBiS: {} users, {} items, {} categories, {} regions; x = -1 for RUBiS-B (bidding mix, \
         uniform items), else RUBiS-C's zipf alpha (50% StoreBid); Doppel's phase length {} ms",
        c.users,
        c.items,
        c.categories,
        c.regions,
        PHASE.as_millis()
    )];
    setup.extend(common_setup(s, threads));
    Ok(Finish {
        title: "rubis: auctions with splittable bids",
        x_label: "RUBiS-C alpha (-1 = RUBiS-B)",
        setup,
        paper: PAPER,
        claims,
        columns: &[
            ("mix", "mix"),
            ("records split", "split_records"),
            ("stashed", "stashed"),
        ],
        table: true,
    }
    .artifacts(s, rows))
}
