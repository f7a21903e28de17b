//! TPC-C settings: scale, transaction mix, remote shares and column-group granularity.

use super::schema;

/// Which transactions run, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpccMix {
    /// The specification's minimum mix: 45% NewOrder, 43% Payment, 4% each of the others.
    Standard,
    /// 50% NewOrder, 50% Payment (STAR's and many papers' TPC-C).
    NewOrderPayment,
    /// NewOrder, Payment and OrderStatus in the standard proportions 45:43:4 (the OCC timestamp
    /// granularity paper runs these three and gives no other weights).
    NewOrderPaymentOrderStatus,
}

impl TpccMix {
    /// Parses the command-line name: "standard", "no-p" or "no-p-os".
    pub fn parse(s: &str) -> Option<TpccMix> {
        match s {
            "standard" => Some(TpccMix::Standard),
            "no-p" => Some(TpccMix::NewOrderPayment),
            "no-p-os" => Some(TpccMix::NewOrderPaymentOrderStatus),
            _ => None,
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            TpccMix::Standard => "standard",
            TpccMix::NewOrderPayment => "no-p",
            TpccMix::NewOrderPaymentOrderStatus => "no-p-os",
        }
    }

    /// Relative weights of the transaction types, indexed like [`super::TXN_TYPES`].
    pub fn weights(self) -> [u32; 5] {
        match self {
            TpccMix::Standard => [45, 43, 4, 4, 4],
            TpccMix::NewOrderPayment => [50, 50, 0, 0, 0],
            TpccMix::NewOrderPaymentOrderStatus => [45, 43, 4, 0, 0],
        }
    }
}

/// TPC-C settings.
#[derive(Clone, Debug)]
pub struct TpccConfig {
    /// Number of warehouses (the scale factor).
    pub warehouses: u32,
    /// Transaction mix.
    pub mix: TpccMix,
    /// NewOrder: share of order lines supplied by another warehouse (spec 0.01).
    pub remote_item_ratio: f64,
    /// Payment: share of payments for a customer of another warehouse (spec 0.15).
    pub remote_payment_ratio: f64,
    /// Fine-grained column groups (see [`super::schema`]).
    pub fine: bool,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses: 1,
            mix: TpccMix::Standard,
            remote_item_ratio: 0.01,
            remote_payment_ratio: 0.15,
            fine: false,
        }
    }
}

impl TpccConfig {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        let max = (1u32 << schema::W_BITS) - 1;
        if self.warehouses == 0 || self.warehouses > max {
            return Err(format!("--warehouses must be between 1 and {max}"));
        }
        for (name, v) in [
            ("--remote-item-ratio", self.remote_item_ratio),
            ("--remote-payment-ratio", self.remote_payment_ratio),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        Ok(())
    }
}
