//! One call's own state: its `Store` (`store`), the guest run and how it
//! ends (`run`, `returned`, `output`), its store dropped off the call's
//! path once it has (`retire`), its memory and table limits
//! (`limits`), its deadline (`deadline`), the host interface it is given
//! (`imports`), the instances kept between a session's calls (`kept`) and
//! those made ahead of calls (`ahead`).

pub(in crate::runtime) mod ahead;
pub(in crate::runtime) mod deadline;
pub(in crate::runtime) mod imports;
pub(in crate::runtime) mod kept;
pub(in crate::runtime) mod limits;
pub(in crate::runtime) mod output;
pub(in crate::runtime) mod retire;
pub(in crate::runtime) mod returned;
pub(in crate::runtime) mod run;
pub(in crate::runtime) mod store;
