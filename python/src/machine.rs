//! The machine model: the tree (detected, `MBSP_TOPOLOGY`, an hwloc XML file or a synthetic
//! description), placements of (nested) plans, and the BSP parameters, as Python dicts, lists
//! and numbers that the Python half turns into objects. They are built from the typed results
//! of mbsp-tools ([`Tree`], [`Process`], [`Measurement`]) with the keys of the JSON that
//! `mbsp topo --json` and `mbsp params --json` print, in the same (sorted) order. And a watch
//! over a measurement ([`MachineWatch`]), for `python -m mbsp.bench`.

use crate::errors;
use mbsp_tools::machine::Tree;
use mbsp_tools::params::{self, Measurement};
use mbsp_tools::placement::{Count, Process, plan};
use mbsp_topology::{Loaded, Machine, Policy};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A dict of `items`, its keys inserted in sorted order: the order of the commands' JSON
/// objects, whose keys serde_json sorts.
fn dict<'py>(
    py: Python<'py>,
    mut items: Vec<(String, Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyDict>> {
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let d = PyDict::new(py);
    for (k, v) in items {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// `(key, value)` pairs for [`dict`], each value converted to a Python object.
macro_rules! items {
    ($py:expr, { $($k:expr => $v:expr),* $(,)? }) => {
        vec![$((String::from($k), $v.into_bound_py_any($py)?)),*]
    };
}

/// The tree as `mbsp topo --json` prints it under `"machine"`.
fn tree_dict<'py>(py: Python<'py>, t: &Tree) -> PyResult<Bound<'py, PyDict>> {
    let packages = t
        .packages
        .iter()
        .map(|p| {
            dict(
                py,
                items!(py, {"os_index" => p.os_index, "numas" => &p.numas, "cores" => &p.cores}),
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    let numas = t
        .numas
        .iter()
        .map(|n| {
            dict(
                py,
                items!(py, {"os_index" => n.os_index, "memory" => n.memory, "cores" => &n.cores}),
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    let cores = t
        .cores
        .iter()
        .map(|c| {
            dict(
                py,
                items!(py, {"package" => c.package, "numa" => c.numa, "pus" => &c.pus}),
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    dict(
        py,
        items!(py, {
            "source" => &t.source,
            "numa_level" => t.numa_level,
            "packages" => packages,
            "numas" => numas,
            "cores" => cores,
        }),
    )
}

/// One number, or a list of several (as `mbsp topo --json` shows a process's packages and NUMA
/// nodes).
fn one_or_many<'py, T>(py: Python<'py>, v: &[T]) -> PyResult<Bound<'py, PyAny>>
where
    T: Copy + IntoPyObject<'py>,
{
    if v.len() == 1 {
        v[0].into_bound_py_any(py)
    } else {
        PyList::new(py, v.iter().copied())?.into_bound_py_any(py)
    }
}

/// The processes of a plan as `mbsp topo --json` prints them under `"processes"`.
fn processes_list<'py>(py: Python<'py>, ps: &[Process]) -> PyResult<Bound<'py, PyList>> {
    let all = ps
        .iter()
        .map(|p| {
            let numa = match &p.numas {
                Some(n) => one_or_many(py, n)?,
                None => py.None().into_bound(py),
            };
            let mut items = items!(py, {
                "pid" => p.pid,
                "package" => one_or_many(py, &p.packages)?,
                "numa" => numa,
                "cores" => &p.cores,
                "pus" => &p.pus,
            });
            if p.per_core > 1 {
                // As `mbsp topo --json`: only where its run stacks processes on a core.
                items.push(("per_core".into(), p.per_core.into_bound_py_any(py)?));
            }
            if !p.children.is_empty() {
                items.push((
                    "children".into(),
                    processes_list(py, &p.children)?.into_any(),
                ));
            }
            dict(py, items)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, all)
}

/// A JSON value as the Python object `json.loads` makes of it (objects as dicts in the order
/// serde_json keeps their keys: sorted, as the commands print them).
fn json_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_bound_py_any(py)?,
            (None, Some(u)) => u.into_bound_py_any(py)?,
            _ => n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?,
        },
        Value::String(s) => s.into_bound_py_any(py)?,
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| json_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// The whole parameter file, exactly as `mbsp params --json` writes it
/// ([`Measurement::to_json`]).
fn measurement_dict<'py>(py: Python<'py>, m: &Measurement) -> PyResult<Bound<'py, PyDict>> {
    Ok(json_py(py, &m.to_json())?.cast_into::<PyDict>()?)
}

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

/// The tree (`mbsp topo --json`'s `"machine"`).
#[pyfunction]
#[pyo3(signature = (xml=None, synthetic=None))]
fn machine_tree<'py>(
    py: Python<'py>,
    xml: Option<&str>,
    synthetic: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let loaded = load(xml, synthetic)?;
    tree_dict(py, &Tree::of(&loaded.machine))
}

/// The placement of a plan (`mbsp topo --json`'s `"processes"`): `levels` outermost first,
/// each a count ("4") or a level ("package", "numa", "core", "pu"); `policy` one of
/// "scattered", "compact", "manual" (with `cpus`, one list of PU OS indices per top-level
/// process).
#[pyfunction]
#[pyo3(signature = (levels, policy, cpus=None, xml=None, synthetic=None))]
fn placement<'py>(
    py: Python<'py>,
    levels: Vec<String>,
    policy: &str,
    cpus: Option<Vec<Vec<u32>>>,
    xml: Option<&str>,
    synthetic: Option<&str>,
) -> PyResult<Bound<'py, PyList>> {
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
        .map(|l| l.parse::<Count>().map_err(errors::tools))
        .collect::<PyResult<Vec<_>>>()?;
    let loaded = load(xml, synthetic)?;
    check_size(&loaded.machine, &counts)?;
    let ps = plan(&loaded.machine, &counts, &policy).map_err(errors::tools)?;
    processes_list(py, &ps)
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
    let shape: Vec<String> = counts.iter().map(Count::to_string).collect();
    Err(errors::value(format!(
        "placement: the plan {} can have more processes than a run can have here ({max})",
        shape.join(" x ")
    )))
}

/// The parameters in force (`MBSP_PARAMS`, this machine's saved ones, or the defaults), and
/// where they come from.
#[pyfunction]
fn params_in_force(py: Python<'_>) -> PyResult<(Bound<'_, PyDict>, String)> {
    let p = mbsp::params::Params::current();
    let d = dict(
        py,
        items!(py, {
            "r" => p.r, "r_stream" => p.r_stream, "g" => p.g, "g_msg" => p.g_msg,
            "g_get_msg" => p.g_get_msg,
            "g_direct" => p.g_direct, "g_direct_msg" => p.g_direct_msg, "l" => p.l,
            "l_reg" => p.l_reg, "fresh" => p.fresh, "turn" => p.turn,
            "turn_coroutine" => p.turn_coroutine, "turn_comm" => p.turn_comm,
            "turn_comm_coroutine" => p.turn_comm_coroutine,
        }),
    )?;
    Ok((d, mbsp::params::source().to_string()))
}

/// Measures the BSP parameters of every level of this machine (or of `levels`), under the
/// scattered and compact policies: the parameter file of `mbsp params --json`. `quick`: a smoke
/// run (seconds; the numbers are not meaningful).
#[pyfunction]
#[pyo3(signature = (levels=None, quick=false))]
fn measure_params(
    py: Python<'_>,
    levels: Option<Vec<String>>,
    quick: bool,
) -> PyResult<Bound<'_, PyDict>> {
    let mut o = if quick {
        params::Options::quick()
    } else {
        params::Options::full()
    };
    o.levels = levels;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    o.stop = Some(stop.clone());
    let m = crate::wait::interruptible(py, "measure_params", stop, move || params::measure(&o))?
        .map_err(errors::tools)?;
    measurement_dict(py, &m)
}

/// Processes a run of this machine has by default (one per core).
#[pyfunction]
fn nprocs() -> usize {
    mbsp::nprocs()
}

/// What the machine did during a measurement ([`mbsp_tools::machine_state::Watch`]): made at
/// the start ([`machine_watch`]), marked between rounds (each mark probes a cache line's round
/// trip between two CPUs for a millisecond or two), asked for its state at the end.
#[pyclass(module = "mbsp._native")]
struct MachineWatch {
    watch: mbsp_tools::machine_state::Watch,
}

/// Starts watching the machine.
#[pyfunction]
fn machine_watch(py: Python<'_>) -> MachineWatch {
    MachineWatch {
        watch: py.detach(mbsp_tools::machine_state::Watch::start),
    }
}

#[pymethods]
impl MachineWatch {
    /// Ends a round.
    fn mark(&mut self, py: Python<'_>) {
        py.detach(|| self.watch.mark());
    }

    /// The state so far: `MachineState::json`'s keys (`quiet`, `causes`, ...) and `line`, the
    /// one-line verdict the commands print.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.watch.state();
        let mut j = s.json();
        j["line"] = serde_json::Value::String(s.line());
        json_py(py, &j)
    }
}

/// Whether A (times `a`, seconds) is at least `target` times as fast as B (times `b`), from
/// interleaved samples of both: `mbsp_tools::stats::speedup_at_least` at 95%. Returns the speed
/// ratio b / a (the Hodges-Lehmann estimate), its interval, the interval's confidence, and the
/// verdict: `met`, `MISSED` or `unclear` (the interval holds the target, or too few samples).
#[pyfunction]
fn speedup_at_least(
    a: Vec<f64>,
    b: Vec<f64>,
    target: f64,
) -> PyResult<(f64, f64, f64, f64, &'static str)> {
    let positive = |v: &[f64]| !v.is_empty() && v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !(positive(&a) && positive(&b) && target.is_finite() && target > 0.0) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "speedup_at_least: needs positive finite times on both sides ({} and {} given) \
             and a positive target ({target})",
            a.len(),
            b.len()
        )));
    }
    let (s, v) = mbsp_tools::stats::speedup_at_least(&a, &b, target, mbsp_tools::stats::CONFIDENCE);
    Ok((s.ratio, s.lo, s.hi, s.level, v.word()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MachineWatch>()?;
    m.add_function(wrap_pyfunction!(speedup_at_least, m)?)?;
    m.add_function(wrap_pyfunction!(machine_watch, m)?)?;
    m.add_function(wrap_pyfunction!(machine_tree, m)?)?;
    m.add_function(wrap_pyfunction!(placement, m)?)?;
    m.add_function(wrap_pyfunction!(params_in_force, m)?)?;
    m.add_function(wrap_pyfunction!(measure_params, m)?)?;
    m.add_function(wrap_pyfunction!(nprocs, m)?)?;
    Ok(())
}
