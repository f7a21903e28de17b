//! The protocols an experiment compares: every protocol of this build, with no-CC as a reference.

use clap::ValueEnum;

use crate::bench::ProtocolName;

/// The protocol that is not serializable and only serves as an upper bound.
pub const REFERENCE: &str = "nocc";

/// A protocol and its command-line name.
#[derive(Clone, Debug)]
pub struct Protocol {
    /// The protocol to run.
    pub id: ProtocolName,
    /// Its `--protocol` name.
    pub name: String,
}

impl Protocol {
    /// Whether this is the non-serializable reference, left out of every verdict.
    pub fn is_reference(&self) -> bool {
        self.name == REFERENCE
    }
}

/// Every protocol of this build, in the order `phasedb bench --protocol` lists them.
pub fn all() -> Vec<Protocol> {
    ProtocolName::value_variants()
        .iter()
        .map(|&id| {
            let value = id
                .to_possible_value()
                .expect("every protocol has a command-line name");
            Protocol {
                id,
                name: value.get_name().to_owned(),
            }
        })
        .collect()
}
