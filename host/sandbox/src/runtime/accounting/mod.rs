//! What a call did, for its error, its audit record and its span: what the
//! sandbox refused (`denials`), the questions it asked (`asks`), what it used
//! (`usage`), and the typed error of every way it can end (`classify`).

pub(in crate::runtime) mod asks;
pub(in crate::runtime) mod classify;
pub(in crate::runtime) mod denials;
pub(crate) mod usage;
