//! Trust: whether something held (a lock, a lease, a leadership) can still be trusted, why
//! not, and how a loss is published. Below both the session and the queue: the session
//! confirms what the servers keep ([`Liveness`]), the queue's holdings report what they see.
//!
//! A hold is trusted while no loss was seen *and* the servers have confirmed its session
//! recently enough: that part is read from the clock at every look, so a process that
//! wakes from a pause longer than the session timeout sees the loss at its first look,
//! before any I/O completes. A loss is published before anything else is done about it
//! (a log line, a callback): nothing a subscriber, a full stderr or user code does may keep
//! a holder from learning it.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;

use tokio::sync::Notify;

use crate::loss::Loss;
use crate::session::Liveness;

/// Whether a hold can still be trusted, and why not; shared by the holding, its guards
/// and leaderships.
#[derive(Clone, Debug)]
pub(crate) struct Trust {
    /// Where the loss is reported, with what starts watching the node.
    loss: Arc<dyn LossPlace>,
    /// Whether awaiting the loss starts watching the node at once ([`LossPlace::watch_now`]);
    /// `false`: the node is watched already.
    awaited: bool,
    /// What the servers confirmed of the session, and the epoch the hold began in; `None`
    /// if its session had already ended.
    confirmed: Option<(Arc<Liveness>, u64)>,
}

impl Trust {
    /// The trust of a hold made now on the session `liveness` is about (`None`: a session
    /// that ended), whose loss is reported at `loss`; if `awaited`, `loss` is told to watch
    /// the node once its loss is awaited.
    pub(crate) fn new(
        liveness: Option<Arc<Liveness>>,
        loss: Arc<dyn LossPlace>,
        awaited: bool,
    ) -> (Trust, Report) {
        let confirmed = liveness.map(|liveness| {
            let epoch = liveness.epoch();
            (liveness, epoch)
        });
        let trust = Trust {
            loss: loss.clone(),
            awaited,
            confirmed,
        };
        (trust, Report(loss))
    }

    /// Whether it can no longer be trusted (a loss was seen, the session is no longer
    /// confirmed, or the hold is over).
    pub(crate) fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// The loss seen so far, if any: once the session is no longer confirmed, the cause
    /// that ended the hold's epoch ([`Loss::Lapsed`] if the clock did).
    pub(crate) fn loss(&self) -> Option<Loss> {
        let seen = *self.loss.cell().seen();
        seen.or_else(|| match &self.confirmed {
            Some((liveness, epoch)) if liveness.trusts(*epoch) => None,
            Some((liveness, epoch)) => Some(liveness.end(*epoch, Loss::Lapsed)),
            None => Some(Loss::Lapsed),
        })
    }

    /// The cause of a loss of the whole session that the hold saw as `seen`: the first
    /// such loss seen in its epoch, by any hold of the session (see [`Liveness::end`]).
    pub(crate) fn of_session(&self, seen: Loss) -> Loss {
        match &self.confirmed {
            Some((liveness, epoch)) => liveness.end(*epoch, seen),
            None => seen,
        }
    }

    /// Resolves once it can no longer be trusted; [`Loss::Closed`] if the hold ended
    /// without a loss (it was released or dropped).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lost(&self) -> Loss {
        if self.awaited {
            self.loss.watch_now();
        }
        tokio::select! {
            biased;
            seen = self.loss.cell().reported() => seen,
            loss = self.lapsed() => loss,
        }
    }

    /// Resolves once the session is no longer confirmed, or a loss of the whole session
    /// ended the hold's epoch, with its cause ([`Loss::Lapsed`] if the clock ended it;
    /// [`Loss::SessionExpired`] at once if the session had ended).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lapsed(&self) -> Loss {
        match &self.confirmed {
            Some((liveness, epoch)) => liveness.lapsed(*epoch).await,
            None => Loss::SessionExpired,
        }
    }

    /// Runs `send` unless a loss was reported or the hold ended, and returns what it made;
    /// a loss or an end reported meanwhile waits until it has returned. A request `send`
    /// sends (zookeeper-client sends at the call) therefore goes out either before the end
    /// of the hold is published (and so before whatever follows it, the node's delete) or
    /// not at all.
    pub(crate) fn unless_settled<T>(&self, send: impl FnOnce() -> T) -> Option<T> {
        let seen = self.loss.cell().seen();
        match *seen {
            Some(_) => None,
            None => Some(send()),
        }
    }

    /// Resolves once a loss was reported, or the hold ended ([`Loss::Closed`]); unlike
    /// [`lost`](Self::lost), without asking for the node to be watched.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn settled(&self) {
        self.loss.cell().reported().await;
    }
}

/// Where a hold's loss is reported once, and read: a lock and one `Notify` (a watch
/// channel's would cost eight notifications per report, and every hold reports once).
#[derive(Debug, Default)]
pub(crate) struct LossCell {
    loss: Mutex<Option<Loss>>,
    reported: Notify,
}

impl LossCell {
    /// The loss reported so far; a report waits while this is kept.
    fn seen(&self) -> MutexGuard<'_, Option<Loss>> {
        // Only an `Option<Loss>` is ever written under the lock: a panic leaves it whole.
        self.loss.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reports `loss` unless a loss was reported already; whether this reported it.
    fn report(&self, loss: Loss) -> bool {
        let reported = {
            let mut seen = self.seen();
            let unset = seen.is_none();
            seen.get_or_insert(loss);
            unset
        };
        if reported {
            self.reported.notify_waiters();
        }
        reported
    }

    /// Resolves with the loss once one is reported.
    ///
    /// # Cancel safety
    /// Cancel safe.
    async fn reported(&self) -> Loss {
        loop {
            // Registered before the look: a report between the look and the wait wakes it.
            let notified = self.reported.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(loss) = *self.seen() {
                return loss;
            }
            notified.await;
        }
    }
}

/// A hold's loss as a value of its own: owned, cloneable and `'static`, so that a task that
/// watches the hold while another works under it needs no borrow of the hold (as a leader in
/// client-go is handed a context, or a task a tokio `CancellationToken`). Every hold offers
/// one (`loss_signal()`, see [`Hold::loss_signal`](crate::Hold::loss_signal)); it reads what
/// the hold's own `is_lost()` and `lost()` read, from any task, and outlives the hold: once
/// the hold is released or dropped it reads as lost ([`Loss::Closed`], unless a loss came
/// first).
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let guard = zk_recipes::Mutex::new(&session, "/locks/orders")?.lock().await?;
/// let signal = guard.loss_signal();
/// let watcher = tokio::spawn(async move {
///     let loss = signal.lost().await;
///     eprintln!("stop work: {loss:?}");
/// });
/// // ... work, checking guard.is_lost() between steps ...
/// guard.release().await?;
/// watcher.await.ok();
/// # Ok(()) }
/// ```
///
/// The signal of a hold made of several ([`MultiGuard`](crate::MultiGuard)) reads as lost
/// once any one of them is.
#[derive(Clone, Debug)]
pub struct LossSignal {
    first: Trust,
    /// The trusts of the other holds of a hold made of several.
    others: Option<Arc<[Trust]>>,
}

impl LossSignal {
    /// The signal of a hold trusted as `trust` says.
    pub(crate) fn new(trust: Trust) -> LossSignal {
        LossSignal {
            first: trust,
            others: None,
        }
    }

    /// The signal of a hold made of this one's and those of `others`: lost once any of
    /// them is.
    pub(crate) fn with(self, others: &[LossSignal]) -> LossSignal {
        let more: Vec<Trust> = self
            .others
            .iter()
            .flat_map(|own| own.iter())
            .chain(others.iter().flat_map(LossSignal::trusts))
            .cloned()
            .collect();
        LossSignal {
            first: self.first,
            others: (!more.is_empty()).then(|| Arc::from(more)),
        }
    }

    fn trusts(&self) -> impl Iterator<Item = &Trust> {
        std::iter::once(&self.first).chain(self.others.iter().flat_map(|others| others.iter()))
    }

    /// Whether the hold can no longer be trusted; read from the clock too, as the hold's
    /// own `is_lost()`.
    pub fn is_lost(&self) -> bool {
        self.trusts().any(Trust::is_lost)
    }

    /// Why the hold can no longer be trusted, if it cannot.
    pub fn loss(&self) -> Option<Loss> {
        self.trusts().find_map(Trust::loss)
    }

    /// Resolves once the hold can no longer be trusted; says why ([`Loss::Closed`] once
    /// the hold was released or dropped).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        if self.others.is_none() {
            return self.first.lost().await;
        }
        let mut waits: Vec<_> = self.trusts().map(|trust| Box::pin(trust.lost())).collect();
        std::future::poll_fn(|cx| {
            let first = waits
                .iter_mut()
                .find_map(|wait| match wait.as_mut().poll(cx) {
                    Poll::Ready(loss) => Some(loss),
                    Poll::Pending => None,
                });
            first.map_or(Poll::Pending, Poll::Ready)
        })
        .await
    }
}

/// Where a hold's loss is reported ([`cell`](Self::cell)), kept in one allocation with
/// what starts watching the hold's node at once when its loss is awaited before it is
/// watched (the holding's monitor).
pub(crate) trait LossPlace: Send + Sync + std::fmt::Debug {
    fn cell(&self) -> &LossCell;

    /// Starts watching the node, unless it is watched already or the hold is over; never
    /// waits.
    fn watch_now(&self);
}

/// Run just before a loss is published, as part of publishing it (an election steps its
/// role down with it). It must only publish: send on a channel, never log or wait.
pub(crate) type Announce = Box<dyn FnOnce() + Send>;

/// Where a hold's loss is reported, once: the first report stands. Both owners report
/// before they let go of it (the holding at its end, the monitor's [`Publisher`] when
/// dropped), so a wait for the loss never outlives its reporters.
#[derive(Debug)]
pub(crate) struct Report(Arc<dyn LossPlace>);

impl Report {
    /// Reports `loss` unless a loss was reported already.
    pub(crate) fn publish(&self, loss: Loss) {
        self.0.cell().report(loss);
    }

    /// A publisher for the task that watches the hold; `announce` runs as part of
    /// publishing.
    pub(crate) fn publisher(&self, announce: Option<Announce>) -> Publisher {
        Publisher {
            report: Report(self.0.clone()),
            announce,
            loss: None,
        }
    }
}

/// Publishes a hold's loss when dropped: the loss its watcher saw, and also when the watcher
/// ended any other way (it panicked: the hold can no longer be watched), unless the hold
/// ended first (it was released or dropped).
pub(crate) struct Publisher {
    report: Report,
    announce: Option<Announce>,
    /// The loss the watcher saw, if it saw one.
    loss: Option<Loss>,
}

impl Publisher {
    /// Whether a loss was published already (the hold ended, or a loss came first).
    pub(crate) fn ended(&self) -> bool {
        self.report.0.cell().seen().is_some()
    }

    /// Records the loss the watcher saw; it is published when the publisher is dropped.
    pub(crate) fn saw(&mut self, loss: Loss) {
        self.loss = Some(loss);
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if self.report.0.cell().seen().is_some() {
            return;
        }
        if let Some(announce) = self.announce.take() {
            // It only sends on a channel; a panic must not stop the loss from following.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(announce));
        }
        self.report.publish(self.loss.unwrap_or(Loss::Unwatched));
    }
}
