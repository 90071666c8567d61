//! The message queue as one process sees it during a superstep: which senders' outboxes hold
//! messages for it and where it is in them. The messages stay in the senders' outboxes
//! (`outbox.rs`), or in this process's copy of the barrier lines they rode in (thread engine:
//! `engine/threads/ride.rs`), and are read in place (`bsmp.rs`, `owned.rs`).

/// Where one sender's messages of the queue are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Src {
    /// The sender.
    pub(crate) pid: u32,
    /// The barrier round whose line carried them, or `None`: the sender's outbox.
    pub(crate) rode: Option<u8>,
}

/// The message queue as seen during one superstep.
#[derive(Clone, Default)]
pub(crate) struct Queue {
    /// The senders of the messages, in pid order (each sender's messages are in one place:
    /// `ride.rs` says why), with the outboxes of slot `slot` (`ctx::slot`).
    pub(crate) srcs: Vec<Src>,
    pub(crate) slot: usize,
    pub(crate) tagsize: usize,
    pub(crate) cur_src: usize,
    /// Offset of the current message in `srcs[cur_src]`'s message records: in bytes in an
    /// outbox, in words in a ride.
    pub(crate) cur_off: usize,
    pub(crate) left: usize,
    pub(crate) left_bytes: usize,
    /// Owned messages handed over to us (in the outboxes of `srcs`) that we have not taken
    /// (`owned.rs`).
    pub(crate) owned: usize,
}

impl Queue {
    /// Forget the messages (they live for one superstep).
    #[inline]
    pub(crate) fn clear(&mut self) {
        if !self.srcs.is_empty() || self.left != 0 {
            self.srcs.clear();
            self.left = 0;
            self.left_bytes = 0;
        }
        self.owned = 0;
        self.cur_src = 0;
        self.cur_off = 0;
    }

    /// Remove the first message (of `len` payload bytes; `next`: the offset of the sender's
    /// next message, if it has one).
    #[inline]
    pub(crate) fn advance(&mut self, next: Option<usize>, len: usize) {
        match next {
            Some(off) => self.cur_off = off,
            None => {
                self.cur_src += 1;
                self.cur_off = 0;
            }
        }
        self.left -= 1;
        self.left_bytes -= len;
    }
}
