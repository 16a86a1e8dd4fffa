//! What `/proc` says of the host's tasks, read for whoever needs it:
//! which are runnable on a CPU now and why a thread of latencyd's did not
//! run (the daemon's gap explainer), the fields of a task's `stat` and
//! `status`, and the container or unit its cgroup names (the observer).
//! Every read is bounded and a task gone is no error.

pub mod cgroup;
pub mod own_state;
pub mod runnable;
pub mod stat;

pub use cgroup::container_of;
pub use own_state::own_state;
pub use runnable::{Runnable, runnable_on};
