//! Registration and tag-size changes over ranks: agreed like the thread engine's, then applied
//! to this rank's table, its mirrors of the others', and its MPI window.

use super::net::Net;
use super::wire::{decode_coll, encode_coll};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::registry::{ElemType, RegOp};
use crate::requests::Coll;
use mpi::ffi;

impl Ctx {
    /// Registration and tag-size changes over ranks: every rank's requests gathered, checked
    /// as in the thread runtime, applied to our table, the mirrors and the window.
    pub(super) fn rank_collective(&mut self, net: &mut Net, g: u32) -> Result<()> {
        let me = self.pid;
        let mut own = Coll::default();
        self.fill_coll(&mut own);
        let areas: Vec<(u64, u64)> = self
            .st
            .get_mut()
            .reg_ops
            .iter()
            .filter_map(|o| match o {
                RegOp::Push {
                    ptr, len, empty, ..
                } => Some((*ptr as u64, if *empty { u64::MAX } else { *len as u64 })),
                _ => None,
            })
            .collect();
        let mut w = Vec::new();
        encode_coll(&own, &areas, &mut w);
        let all = net.all_gather_words(&w);
        let (colls, all_areas): (Vec<Coll>, Vec<Vec<(u64, u64)>>) =
            all.iter().map(|w| decode_coll(w, self.step + 1)).unzip();
        let applied = self.collective_with(&colls, g)?;
        let mut push_no = 0;
        for &(push, slot, generation) in &applied {
            for (k, areas) in all_areas.iter().enumerate() {
                let (ptr, len) = if push { areas[push_no] } else { (0, 0) };
                let empty = push && len == u64::MAX;
                if k == me {
                    continue;
                }
                let op = if push {
                    RegOp::Push {
                        slot,
                        generation,
                        ptr: ptr as *mut u8,
                        len: if empty { 0 } else { len as usize },
                        empty,
                        ty: ElemType::RAW,
                        keep: None,
                    }
                } else {
                    RegOp::Pop { slot }
                };
                let mut graveyard = Vec::new();
                // SAFETY: the mirror of rank k exists on this rank only; only this thread
                // touches it.
                unsafe { self.run.proc(k).table_mut(|t| t.apply(op, &mut graveyard)) };
            }
            if push {
                push_no += 1;
            }
        }
        // The window holds the union of our registered areas, as disjoint intervals (MPI
        // forbids attaching overlapping memory, and registrations may overlap or be popped and
        // pushed again in one superstep): detach what is no longer an interval, then attach
        // the new ones. No one-sided access reaches us before we publish this sync as done.
        let mut areas: Vec<(usize, usize)> = Vec::new();
        // SAFETY: our own table, in our sync, after its changes.
        unsafe {
            self.me().table(|t| {
                t.active_areas(|ptr, len| areas.push((ptr as usize, ptr as usize + len)))
            })
        };
        areas.sort_unstable();
        let mut union: Vec<(usize, usize)> = Vec::new();
        for (a, b) in areas {
            match union.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => union.push((a, b)),
            }
        }
        for iv in net.attached.iter().filter(|iv| !union.contains(iv)) {
            // SAFETY: attached by an earlier sync, still allocated (a popped area is kept in
            // the graveyard until this sync ends; raw ones by the caller's contract).
            unsafe { ffi::MPI_Win_detach(net.win, iv.0 as *const _) };
        }
        for iv in union.iter().filter(|iv| !net.attached.contains(iv)) {
            // SAFETY: our registered memory, alive until a later sync detaches it.
            unsafe { ffi::MPI_Win_attach(net.win, iv.0 as *mut _, (iv.1 - iv.0) as ffi::MPI_Aint) };
        }
        net.attached = union;
        Ok(())
    }
}
