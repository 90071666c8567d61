//! The JSON form of a profile's report (`MBSP_PROFILE=FILE.json`, [`Report::to_json`]).

use super::report::{Report, Totals};

impl Totals {
    /// This total as a JSON object.
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "depth": self.depth, "supersteps": self.supersteps,
            "w": self.w, "h": self.h, "mean_wait": self.wait,
            "measured": self.measured, "predicted": self.predicted, "lazy": self.lazy,
        })
    }
}

impl Report {
    /// The report as JSON (nested runs under `"nested"`).
    pub fn to_json(&self) -> String {
        self.json(true).to_string()
    }

    pub(super) fn json(&self, top: bool) -> serde_json::Value {
        let (measured, predicted) = self.totals();
        let mut v = serde_json::json!({
            "p": self.p,
            "path": self.path,
            "started_in": self.started_in,
            "g": self.g,
            "l": self.l,
            "measured_seconds": measured,
            "predicted_seconds": predicted,
            "turns": self.turns,
            "coroutines": self.coroutines,
            "turn": self.turn,
            "turn_comm": self.turn_comm,
            "supersteps": self.rows.iter().map(|r| serde_json::json!({
                "superstep": r.superstep, "region": r.region.map(|i| self.region_name(i)),
                "w": r.w, "imbalance": r.imbalance, "h": r.h,
                "h_immediate": r.h_immediate, "mean_wait": r.mean_wait,
                "predicted": r.predicted, "measured": r.measured, "lazy": r.lazy,
            })).collect::<Vec<_>>(),
            "regions": self.regions.iter().map(Totals::json).collect::<Vec<_>>(),
            "processes": self.processes.iter().map(|t| serde_json::json!({
                "pid": t.pid, "compute": t.compute, "sync": t.sync, "wait": t.wait,
                "words_sent": t.words_sent, "words_received": t.words_received,
                "place": t.place,
            })).collect::<Vec<_>>(),
            "nested": self.nested.iter().map(|n| n.json(false)).collect::<Vec<_>>(),
        });
        if top {
            v["levels"] = self.levels().iter().map(Totals::json).collect();
        }
        v
    }
}
