//! The plan view of `mbsp affinity`: on a machine that is not this one, where each process of
//! every shape would go under every policy, side by side (nothing is run), and what the BSP
//! model predicts for the kernels it can price from the parameters alone: each plan's
//! communicating group priced with its level's parameters (a group inside one package with the
//! `package` level's, one that spans packages with the `machine` level's), so that a parameter
//! file measured on the machine the tree describes shows what placement changes.

use super::kernels::{Group, Sizes, model};
use super::{Experiment, Kernel, Options, levels_text, plan_of};
use mbsp::params::Params;
use mbsp_tools::Result;
use mbsp_tools::placement::{self, Process};
use mbsp_topology::{Machine, ranges};
use serde_json::{Value, json};

/// One process of a plan: its path (`0`, `1/3`) and where it is.
fn flatten(m: &Machine, nodes: &[Process], path: &str, out: &mut Vec<(String, String)>) {
    for (pid, n) in nodes.iter().enumerate() {
        let name = if path.is_empty() {
            pid.to_string()
        } else {
            format!("{path}/{pid}")
        };
        let d = &n.domain;
        out.push((
            name.clone(),
            format!(
                "pkg {}, NUMA {}, cores {}",
                ranges(d.packages(m).iter().map(|&x| x as u32)),
                ranges(d.numas(m)),
                ranges(d.cores(m).iter().map(|&x| x as u32)),
            ),
        ));
        flatten(m, &n.children, &name, out);
    }
}

/// The packages and NUMA nodes the leaves of a plan use: `packages 0-1, NUMA 0-3`.
fn used(m: &Machine, nodes: &[Process]) -> String {
    fn walk(m: &Machine, nodes: &[Process], pk: &mut Vec<u32>, nu: &mut Vec<u32>) {
        for n in nodes {
            if n.children.is_empty() {
                pk.extend(n.domain.packages(m).iter().map(|&x| x as u32));
                nu.extend(n.domain.numas(m));
            } else {
                walk(m, &n.children, pk, nu);
            }
        }
    }
    let (mut pk, mut nu) = (Vec::new(), Vec::new());
    walk(m, nodes, &mut pk, &mut nu);
    pk.sort_unstable();
    pk.dedup();
    nu.sort_unstable();
    nu.dedup();
    format!("uses packages {}, NUMA {}", ranges(pk), ranges(nu))
}

/// Prints (or, with `--json`, writes as JSON) the plans of every shape under every policy.
pub fn print(e: &Experiment, o: &Options) -> Result<()> {
    let m = &e.loaded.machine;
    let mut shapes_json = Vec::new();
    let mut text = String::new();
    text.push_str(&format!(
        "machine: {} ({} packages, {} NUMA nodes, {} cores, {} PUs)\n\
         planned only: not this machine, so nothing is run or bound\n",
        m.source(),
        m.packages().len(),
        m.numas().len(),
        m.cores().len(),
        m.pus().len()
    ));
    let sizes = Sizes::new(o.quick);
    let priced: Vec<Kernel> = e
        .kernels
        .iter()
        .copied()
        .filter(|&k| model(k, &Params::DEFAULT, &sizes, 2).is_some())
        .collect();
    for shape in &e.shapes {
        let mut columns = Vec::new();
        let mut policies_json = Vec::new();
        let mut predictions: Vec<Vec<String>> =
            priced.iter().map(|k| vec![k.name().into()]).collect();
        for pol in &e.policies {
            let levels = shape.levels(&pol.policy, e.p);
            let nodes = plan_of(m, &levels, &pol.policy)
                .map_err(|err| err.context(format!("{} ({shape})", pol.label)))?;
            let mut procs = Vec::new();
            flatten(m, &nodes, "", &mut procs);
            let group = Group::of(&nodes);
            let params = Params::for_placement(group.level(m), group.p, &pol.label);
            let mut predicted_json = Vec::new();
            for (row, &k) in predictions.iter_mut().zip(&priced) {
                let (t, formula, _) = model(k, &params, &sizes, group.p).expect("priced");
                row.push(format!(
                    "{} ({} p={})",
                    super::report::secs(t),
                    group.level(m),
                    group.p
                ));
                predicted_json.push(json!({
                    "kernel": k.name(), "predicted_seconds": t, "model": formula,
                    "params_level": group.level(m), "group_p": group.p,
                }));
            }
            policies_json.push(json!({
                "policy": pol.label,
                "plan": levels_text(&levels),
                "uses": used(m, &nodes),
                "processes": placement::to_json(&nodes),
                "predictions": predicted_json,
            }));
            columns.push((
                pol.label.clone(),
                levels_text(&levels),
                used(m, &nodes),
                procs,
            ));
        }
        shapes_json.push(json!({ "shape": shape.to_string(), "policies": policies_json }));
        // Rows: every process path of any policy, in the order they first appear.
        let mut paths: Vec<String> = Vec::new();
        for (_, _, _, procs) in &columns {
            for (path, _) in procs {
                if !paths.contains(path) {
                    paths.push(path.clone());
                }
            }
        }
        let mut table: Vec<Vec<String>> = Vec::new();
        table.push(
            std::iter::once("process".to_string())
                .chain(columns.iter().map(|c| c.0.clone()))
                .collect(),
        );
        table.push(
            std::iter::once("plan".to_string())
                .chain(columns.iter().map(|c| c.1.clone()))
                .collect(),
        );
        for path in &paths {
            let mut row = vec![path.clone()];
            for (_, _, _, procs) in &columns {
                let cell = procs.iter().find(|(p, _)| p == path);
                row.push(cell.map_or("-".into(), |c| c.1.clone()));
            }
            table.push(row);
        }
        table.push(
            std::iter::once("leaves".to_string())
                .chain(columns.iter().map(|c| c.2.clone()))
                .collect(),
        );
        text.push_str(&format!("\nshape {shape}\n"));
        text.push_str(&super::report::align(&table, &[]));
        if !predictions.is_empty() {
            let mut t = vec![
                std::iter::once("BSP prediction".to_string())
                    .chain(e.policies.iter().map(|p| p.label.clone()))
                    .collect::<Vec<_>>(),
            ];
            t.extend(predictions);
            text.push('\n');
            text.push_str(&super::report::align(&t, &[]));
        }
    }
    if !priced.is_empty() {
        text.push_str(&format!(
            "\npredictions per step from {} (each with the parameters of the level its \
             communicating processes make up, measured with that many under that policy where \
             the file has them; fft and spmv need a run)\n",
            mbsp::params::source()
        ));
    }
    if !o.program.is_empty() {
        let values: Vec<String> = e
            .policies
            .iter()
            .map(|p| format!("{}={}", mbsp::AFFINITY_ENV, p.label))
            .collect();
        text.push_str(&format!(
            "\nthe program would be run with {} (not run: not this machine)\n",
            values.join(", then ")
        ));
    }
    if o.json {
        let v: Value = json!({
            "machine": m.source().to_string(),
            "applied": false,
            "shapes": shapes_json,
        });
        println!("{v:#}");
    } else {
        print!("{text}");
    }
    Ok(())
}
