//! # mbsp-topology — machine trees, placement plans and binding
//!
//! * [`Machine`]: the tree machine → package → NUMA node → core → PU (with L2/L3 caches), as
//!   plain data, from hwloc: detected ([`Machine::detect`]), from a synthetic description
//!   ([`Machine::synthetic`]), from an XML file ([`Machine::xml`]), or from the environment
//!   variable [`ENV`] (`MBSP_TOPOLOGY`), which every program built on mbsp honours
//!   ([`Machine::current`]).
//! * [`plan`]: where `p` processes go inside a [`Domain`] (a set of PUs) under a [`Policy`]:
//!   compact, scattered or manual.
//! * [`Binder`]: applies a plan on the real machine (threads and memory); on a loaded (fake)
//!   machine it reports that nothing is applied.
//! * Errors are typed: [`TopologyError`] (loading a machine; its `source()` is hwloc's error or
//!   an I/O error) and [`PlanError`] (making a plan).
//!
//! ```
//! let m = mbsp_topology::Machine::synthetic("package:2 numa:2 core:4 pu:2").unwrap().machine;
//! assert_eq!((m.packages().len(), m.numas().len(), m.cores().len(), m.pus().len()), (2, 4, 16, 32));
//! let plan = mbsp_topology::plan(&m, &m.whole(), 4, &mbsp_topology::Policy::Scattered).unwrap();
//! // Scattered: the four processes get one NUMA node (4 cores) each, alternating packages.
//! assert_eq!(plan[0].packages(&m), vec![0]);
//! assert_eq!(plan[1].packages(&m), vec![1]);
//! assert_eq!(plan[0].cores(&m).len(), 4);
//! ```

mod affinity;
mod bind;
mod error;
mod load;
mod plan;
mod tree;

pub use bind::{Binder, Binding, NotBound};
pub use error::{HwlocError, HwlocErrorKind, LocationError, PlanError, TopologyError};
pub use load::{ENV, Loaded};
pub use plan::{Level, Policy, core_sharing, count_at, plan, plan_per, shares};
pub use tree::{Cache, Core, Domain, Machine, Numa, Package, Pu, Source, ranges};
