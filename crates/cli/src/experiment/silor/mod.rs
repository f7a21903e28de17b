//! SiloR's (Zheng et al., OSDI 2014) experiment: what durability costs and how fast recovery is,
//! against issue 34's targets.

pub mod durability;
