//! Loading and planning errors are typed, keep their one-line messages, and chain hwloc's or the
//! operating system's error through `source()`.

use mbsp_topology::{
    ENV, HwlocError, HwlocErrorKind, Level, Machine, PlanError, Policy, TopologyError, plan,
};
use std::error::Error;
use std::io::ErrorKind;

/// The error and every source below it, outermost first.
fn chain<'a>(e: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    let mut out = vec![e];
    let mut cur = e;
    while let Some(s) = cur.source() {
        out.push(s);
        cur = s;
    }
    out
}

#[test]
fn a_missing_xml_file_is_an_io_error() {
    let e = Machine::xml("/nonexistent/machine.xml").unwrap_err();
    assert!(
        matches!(&e, TopologyError::XmlFile { path, .. } if path.to_str() == Some("/nonexistent/machine.xml")),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "cannot load topology from XML file /nonexistent/machine.xml: no such file"
    );
    let io = e
        .source()
        .unwrap()
        .downcast_ref::<std::io::Error>()
        .unwrap();
    assert_eq!(io.kind(), ErrorKind::NotFound);

    // A directory is not a file either.
    let dir = std::env::temp_dir();
    let e = Machine::xml(&dir).unwrap_err();
    assert!(matches!(e, TopologyError::XmlFile { .. }), "{e:?}");
    assert!(e.to_string().contains("not a regular file"), "{e}");
    assert!(e.source().unwrap().is::<std::io::Error>());
}

#[test]
fn an_invalid_xml_file_chains_hwlocs_error() {
    let f = std::env::temp_dir().join(format!("mbsp-topology-bad-{}.xml", std::process::id()));
    std::fs::write(&f, "this is not hwloc XML").unwrap();
    let e = Machine::xml(&f).unwrap_err();
    std::fs::remove_file(&f).unwrap();
    assert!(
        matches!(&e, TopologyError::Xml { path, .. } if *path == f),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot load topology from XML file {}: ",
            f.display()
        )),
        "{msg}"
    );
    let below = chain(&e);
    assert!(below.len() >= 2, "{e}: no source");
    let hwloc = below[1].downcast_ref::<HwlocError>();
    assert!(
        hwloc.is_some_and(|h| matches!(
            h.kind(),
            HwlocErrorKind::Invalid | HwlocErrorKind::Call { .. }
        )),
        "source of {e}: {:?}",
        below[1]
    );
    assert!(msg.ends_with(&below[1].to_string()), "{msg}");
}

#[test]
fn an_invalid_synthetic_description_chains_hwlocs_error() {
    let e = Machine::from_spec("synthetic:package:2 banana:3").unwrap_err();
    assert!(
        matches!(&e, TopologyError::Synthetic { description, .. } if description == "package:2 banana:3"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "invalid synthetic topology \"package:2 banana:3\": hwloc rejected the topology data \
         string as invalid (expected e.g. \"package:2 numa:2 core:8 pu:2\")"
    );
    let kind = |e: &TopologyError| {
        e.source()?
            .downcast_ref::<HwlocError>()
            .map(HwlocError::kind)
    };
    assert_eq!(kind(&e), Some(HwlocErrorKind::Invalid));
    let e = Machine::synthetic("core:2\0").unwrap_err();
    assert_eq!(kind(&e), Some(HwlocErrorKind::ContainsNul));
    assert!(
        e.to_string()
            .contains("topology data string can't contain the NUL char"),
        "{e}"
    );
}

#[test]
fn an_unknown_specification_names_the_variable() {
    let e = Machine::from_spec("whatever").unwrap_err();
    assert!(
        matches!(&e, TopologyError::EnvSpec { var, value } if *var == ENV && value == "whatever"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "MBSP_TOPOLOGY=\"whatever\" is not understood: use synthetic:<description>, xml:<path> \
         or a path ending in .xml"
    );
    assert!(e.source().is_none());
    // The typed error converts into the usual boxed error and keeps its chain.
    let boxed: Box<dyn Error + Send + Sync> = Machine::from_spec("x.xml").unwrap_err().into();
    assert!(boxed.downcast_ref::<TopologyError>().is_some());
    assert!(boxed.source().unwrap().is::<std::io::Error>());
}

#[test]
fn plan_errors_are_typed() {
    let m = Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
    let w = m.whole();
    assert_eq!(
        plan(&m, &w, 0, &Policy::Compact).unwrap_err(),
        PlanError::ZeroProcesses
    );
    assert_eq!(
        plan(&m, &w, 3, &Policy::Manual(vec![vec![0]])).unwrap_err(),
        PlanError::ManualCount { sets: 1, procs: 3 }
    );
    assert_eq!(
        plan(&m, &w, 2, &Policy::Manual(vec![vec![0], vec![]])).unwrap_err(),
        PlanError::ManualEmpty { pid: 1 }
    );
    assert_eq!(
        plan(&m, &w, 1, &Policy::Manual(vec![vec![8]])).unwrap_err(),
        PlanError::ManualNoSuchCpu {
            pid: 0,
            cpu: 8,
            available: (0..8).collect()
        }
    );
    let pkg1 = &mbsp_topology::plan_per(&m, &w, Level::Package)[1];
    let e = plan(&m, pkg1, 1, &Policy::Manual(vec![vec![1]])).unwrap_err();
    assert_eq!(
        e,
        PlanError::ManualOutside {
            pid: 0,
            cpu: 1,
            domain: vec![4, 5, 6, 7]
        }
    );
    assert_eq!(
        e.to_string(),
        "manual CPU set for pid 0 names CPU 1, outside the CPUs being placed (4-7)"
    );
    assert!(e.source().is_none());
    let e = "rack".parse::<Level>().unwrap_err();
    assert_eq!(
        e,
        PlanError::UnknownLevel {
            name: "rack".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "unknown level \"rack\": use package, numa, core or pu"
    );
}
