//! The paper's analytical scaling models (§III-B and §IV-D), which the experiments print beside
//! measured points. `gamma_e` and `gamma_t` are the costs of executing and of terminating
//! (certifying and applying) one transaction at a replica, in any common unit.

/// DUR's scaling with `n` replicas that all execute transactions (equation 3):
/// `S_DUR(n) = n (γe + γt) / (γe + n γt)`.
pub fn dur_scaling(n: f64, gamma_e: f64, gamma_t: f64) -> f64 {
    n * (gamma_e + gamma_t) / (gamma_e + n * gamma_t)
}

/// P-DUR's scaling with `n` replicas of `p` partitions and a share `g` (0 to 1) of
/// cross-partition transactions, relative to one replica of one partition (equation 5):
/// `S_P-DUR(n, p, g) = n p (γe + γt) / ((γe + n γt)(1 − g + p g))`. The model assumes
/// cross-partition transactions touch every partition.
pub fn pdur_scaling(n: f64, p: f64, g: f64, gamma_e: f64, gamma_t: f64) -> f64 {
    n * p * (gamma_e + gamma_t) / ((gamma_e + n * gamma_t) * (1.0 - g + p * g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn the_models_meet_the_limits_the_paper_derives() {
        let (e, t) = (3.0, 1.0);
        let big = 1e9;
        // Equation 4: DUR tends to (γe + γt) / γt.
        assert!(close(dur_scaling(big, e, t), (e + t) / t));
        assert!(close(dur_scaling(1.0, e, t), 1.0));
        // Equation 6: single-partition transactions, p times DUR's limit.
        assert!(close(pdur_scaling(big, 8.0, 0.0, e, t), 8.0 * (e + t) / t));
        // Equation 7: all cross-partition, DUR's limit.
        assert!(close(pdur_scaling(big, 8.0, 1.0, e, t), (e + t) / t));
        // Equation 8: one replica, many partitions, tends to 1/g.
        assert!(close(pdur_scaling(1.0, big, 0.25, e, t), 4.0));
        // One replica, no cross-partition transactions: linear in the partitions.
        assert!(close(pdur_scaling(1.0, 2.0, 0.0, e, t), 2.0));
    }
}
