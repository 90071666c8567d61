//! The machine model: the tree (detected, `MBSP_TOPOLOGY`, an hwloc XML file or a synthetic
//! description), placements of (nested) plans, and the BSP parameters, as JSON texts that the
//! Python half turns into objects.

use crate::errors;
use mbsp_cli::topo::{Count, machine_json, plan_json};
use mbsp_topology::{Loaded, Machine, Policy};
use pyo3::prelude::*;

/// The machine: from `xml` or `synthetic` if given (not both), else detected (honouring
/// `MBSP_TOPOLOGY`).
fn load(xml: Option<&str>, synthetic: Option<&str>) -> PyResult<Loaded> {
    match (xml, synthetic) {
        (Some(_), Some(_)) => Err(errors::value("Machine: give xml or synthetic, not both")),
        (Some(f), None) => Machine::xml(f).map_err(|e| errors::io(f, e)),
        (None, Some(s)) => Machine::synthetic(s).map_err(errors::value),
        (None, None) => Machine::current().map_err(errors::value),
    }
}

/// The tree as JSON (`mbsp topo --json`'s `"machine"`).
#[pyfunction]
#[pyo3(signature = (xml=None, synthetic=None))]
fn machine_tree(xml: Option<&str>, synthetic: Option<&str>) -> PyResult<String> {
    let loaded = load(xml, synthetic)?;
    Ok(machine_json(&loaded.machine).to_string())
}

/// The placement of a plan as JSON (`mbsp topo --json`'s `"processes"`): `levels` outermost
/// first, each a count ("4") or a level ("package", "numa", "core", "pu"); `policy` one of
/// "scattered", "compact", "manual" (with `cpus`, one list of PU OS indices per top-level
/// process).
#[pyfunction]
#[pyo3(signature = (levels, policy, cpus=None, xml=None, synthetic=None))]
fn placement(
    levels: Vec<String>,
    policy: &str,
    cpus: Option<Vec<Vec<u32>>>,
    xml: Option<&str>,
    synthetic: Option<&str>,
) -> PyResult<String> {
    let policy = match (policy, cpus) {
        ("scattered", None) => Policy::Scattered,
        ("compact", None) => Policy::Compact,
        ("manual", Some(sets)) => Policy::Manual(sets),
        ("manual", None) => return Err(errors::value("placement: policy 'manual' needs cpus")),
        ("scattered" | "compact", Some(_)) => {
            return Err(errors::value("placement: cpus go with policy 'manual'"));
        }
        (other, _) => {
            return Err(errors::value(format!(
                "placement: unknown policy '{other}' (scattered, compact, manual)"
            )));
        }
    };
    if levels.is_empty() {
        return Err(errors::value("placement: give at least one level"));
    }
    let counts = levels
        .iter()
        .map(|l| l.parse::<Count>().map_err(errors::cli))
        .collect::<PyResult<Vec<_>>>()?;
    let loaded = load(xml, synthetic)?;
    check_size(&loaded.machine, &counts)?;
    let v = plan_json(&loaded.machine, &counts, &policy).map_err(errors::cli)?;
    Ok(v.to_string())
}

/// The most processes a plan may have: what a run may have here (`mbsp::max_procs`), else
/// 2^20. A plan is a list of every process with its place: a larger one would only exhaust
/// memory.
fn max_plan() -> usize {
    mbsp::max_procs().map_or(1 << 20, |(max, _)| max)
}

/// Refuses a plan of more processes than [`max_plan`]. Its size is at most the product of its
/// counts, times the machine's PUs when it has levels of one process per object (those only
/// divide what the level above owns, so all of them together give at most one process per PU
/// under each process of the counted levels).
fn check_size(m: &Machine, counts: &[Count]) -> PyResult<()> {
    let max = max_plan();
    let per = counts.iter().any(|c| matches!(c, Count::Per(_)));
    let mut total: Option<usize> = Some(if per { m.pus().len().max(1) } else { 1 });
    for c in counts {
        if let Count::N(n) = c {
            total = total.and_then(|t| t.checked_mul(*n));
        }
    }
    if total.is_some_and(|t| t <= max) {
        return Ok(());
    }
    let shape: Vec<String> = counts
        .iter()
        .map(|c| match c {
            Count::N(n) => n.to_string(),
            Count::Per(l) => format!("one per {l}"),
        })
        .collect();
    Err(errors::value(format!(
        "placement: the plan {} can have more processes than a run can have here ({max})",
        shape.join(" x ")
    )))
}

/// The parameters in force (`MBSP_PARAMS`, this machine's saved ones, or the defaults) as JSON,
/// and where they come from.
#[pyfunction]
fn params_in_force() -> (String, String) {
    let p = mbsp::params::Params::current();
    let v = serde_json::json!({
        "r": p.r, "g": p.g, "g_direct": p.g_direct, "l": p.l, "fresh": p.fresh,
    });
    (v.to_string(), mbsp::params::source().to_string())
}

/// Measures the BSP parameters of every level of this machine (or of `levels`), under the
/// scattered and compact policies: the JSON file of `mbsp params --json`. `quick`: a smoke run
/// (seconds; the numbers are not meaningful).
#[pyfunction]
#[pyo3(signature = (levels=None, quick=false))]
fn measure_params(py: Python<'_>, levels: Option<Vec<String>>, quick: bool) -> PyResult<String> {
    let mut o = if quick {
        mbsp_cli::params_cmd::Options::quick()
    } else {
        mbsp_cli::params_cmd::Options::full()
    };
    o.levels = levels;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    o.stop = Some(stop.clone());
    let v = crate::wait::interruptible(py, "measure_params", stop, move || {
        mbsp_cli::params_cmd::measure_json(&o)
    })?
    .map_err(errors::cli)?;
    Ok(v.to_string())
}

/// Processes a run of this machine has by default (one per core).
#[pyfunction]
fn nprocs() -> usize {
    mbsp::nprocs()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(machine_tree, m)?)?;
    m.add_function(wrap_pyfunction!(placement, m)?)?;
    m.add_function(wrap_pyfunction!(params_in_force, m)?)?;
    m.add_function(wrap_pyfunction!(measure_params, m)?)?;
    m.add_function(wrap_pyfunction!(nprocs, m)?)?;
    Ok(())
}
