//! The shard mesh: a bounded single-producer single-consumer channel from every shard to every
//! other shard.
//!
//! With N shards there are N × (N − 1) directed channels (none from a shard to itself; with
//! one shard the mesh is empty). They are glommio `shared_channel`s: lock-free ring buffers
//! whose two ends live on two executors, waking each other through the executors' notifiers.
//! Messages move by value — an Arrow `RecordBatch` is a handful of `Arc`s, so a frame crosses
//! shards by reference, never copied.
//!
//! Every channel is bounded ([`RuntimeConfig::mesh_capacity_messages`], rounded up to a power
//! of two by glommio): [`MeshSender::send`] waits while the channel is full, so a slow
//! receiver backpressures its senders and nothing is dropped; [`MeshSender::try_send`] hands
//! the message back instead of waiting.
//!
//! The runtime builds every channel before any shard runs and connects both ends inside each
//! shard's executor before the shard's main task starts, so a shard's [`Mesh`] is ready to use.
//! A shard takes its receivers once ([`Mesh::take_receivers`]) and drains each with its own
//! local task (or a select). When a shard's executor ends its ends close: its peers' senders
//! then fail with [`MeshClosed`] and their receivers return `None` once drained.
//!
//! [`RuntimeConfig::mesh_capacity_messages`]: crate::runtime::RuntimeConfig::mesh_capacity_messages

use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::channels::shared_channel::{SharedReceiver, SharedSender};
use glommio::{GlommioError, ResourceType};

/// Why [`MeshSender::send`] failed: the receiving shard has gone (its executor ended or it
/// dropped the receiver); the message is handed back.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("shard mesh channel to shard {to} is closed")]
pub struct MeshClosed<M> {
    /// The shard the message was for.
    pub to: usize,
    /// The message that was not sent.
    pub message: M,
}

/// Why [`MeshSender::try_send`] did not send; the message is handed back either way.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeshTrySendError<M> {
    /// The channel is full: the receiver is behind. Retry later or `send().await`.
    #[error("shard mesh channel to shard {to} is full")]
    Full {
        /// The shard the message was for.
        to: usize,
        /// The message that was not sent.
        message: M,
    },
    /// The receiving shard has gone.
    #[error("shard mesh channel to shard {to} is closed")]
    Closed {
        /// The shard the message was for.
        to: usize,
        /// The message that was not sent.
        message: M,
    },
}

impl<M> MeshTrySendError<M> {
    /// The message that was not sent.
    pub fn into_message(self) -> M {
        match self {
            Self::Full { message, .. } | Self::Closed { message, .. } => message,
        }
    }

    /// Whether the channel was full (rather than closed).
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full { .. })
    }
}

/// The sending end of one mesh channel, from this shard to shard [`MeshSender::to`].
pub struct MeshSender<M: Send + 'static> {
    to: usize,
    inner: ConnectedSender<M>,
}

impl<M: Send + 'static> std::fmt::Debug for MeshSender<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshSender")
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl<M: Send + 'static> MeshSender<M> {
    /// The shard this sender delivers to.
    pub fn to(&self) -> usize {
        self.to
    }

    /// Sends `message`, waiting while the channel is full. Fails (handing the message back)
    /// only when the receiving shard has gone.
    pub async fn send(&self, message: M) -> Result<(), MeshClosed<M>> {
        self.inner.send(message).await.map_err(|error| MeshClosed {
            to: self.to,
            message: channel_item(error),
        })
    }

    /// Sends `message` if the channel has room now; otherwise hands it back.
    pub fn try_send(&self, message: M) -> Result<(), MeshTrySendError<M>> {
        self.inner.try_send(message).map_err(|error| match error {
            GlommioError::WouldBlock(ResourceType::Channel(message)) => MeshTrySendError::Full {
                to: self.to,
                message,
            },
            other => MeshTrySendError::Closed {
                to: self.to,
                message: channel_item(other),
            },
        })
    }

    /// Closes the channel from this side: the receiver sees `None` once it has drained what
    /// was sent, and later sends fail.
    pub fn close(&self) {
        self.inner.close();
    }
}

/// The receiving end of one mesh channel, from shard [`MeshReceiver::from`] to this shard.
pub struct MeshReceiver<M: Send + 'static> {
    from: usize,
    inner: ConnectedReceiver<M>,
}

impl<M: Send + 'static> std::fmt::Debug for MeshReceiver<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshReceiver")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl<M: Send + 'static> MeshReceiver<M> {
    /// The shard this receiver hears from.
    pub fn from(&self) -> usize {
        self.from
    }

    /// The next message, waiting while the channel is empty; `None` once the sending shard
    /// has gone (or closed its sender) and everything it sent has been received.
    pub async fn recv(&self) -> Option<M> {
        self.inner.recv().await
    }
}

/// One shard's view of the mesh: a sender to every other shard and, until taken, a receiver
/// from every other shard.
pub struct Mesh<M: Send + 'static> {
    shard: usize,
    /// Indexed by destination shard; `None` at this shard's own index.
    senders: Vec<Option<MeshSender<M>>>,
    receivers: Option<Vec<(usize, MeshReceiver<M>)>>,
}

impl<M: Send + 'static> std::fmt::Debug for Mesh<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("shard", &self.shard)
            .field("shards", &self.senders.len())
            .field("receivers_taken", &self.receivers.is_none())
            .finish()
    }
}

impl<M: Send + 'static> Mesh<M> {
    /// The shard this view belongs to.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// How many shards the mesh connects (this one included).
    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// The sender to shard `to`.
    ///
    /// # Panics
    ///
    /// When `to` is this shard or not a shard: a shard handles its own work directly, and shard
    /// indexes come from [`crate::branch_key`] placement over the same shard count, so either
    /// is a bug in the caller. [`Mesh::try_sender`] is the non-panicking form.
    pub fn sender(&self, to: usize) -> &MeshSender<M> {
        match self.try_sender(to) {
            Some(sender) => sender,
            None => panic!(
                "shard {} has no mesh sender to shard {to} (shards: {}; a shard never sends \
                 to itself)",
                self.shard,
                self.senders.len()
            ),
        }
    }

    /// The sender to shard `to`, or `None` when `to` is this shard or not a shard.
    pub fn try_sender(&self, to: usize) -> Option<&MeshSender<M>> {
        self.senders.get(to).and_then(Option::as_ref)
    }

    /// Every sender, in destination shard order (this shard skipped).
    pub fn senders(&self) -> impl Iterator<Item = &MeshSender<M>> {
        self.senders.iter().flatten()
    }

    /// Takes the receivers from every other shard, as `(from shard, receiver)` in shard order.
    /// The first call gets them all; later calls get an empty list.
    pub fn take_receivers(&mut self) -> Vec<(usize, MeshReceiver<M>)> {
        self.receivers.take().unwrap_or_default()
    }
}

/// One shard's unconnected ends, built on the starting thread and moved to the shard thread.
pub(crate) struct MeshEnds<M: Send + 'static> {
    shard: usize,
    shard_count: usize,
    senders: Vec<(usize, SharedSender<M>)>,
    receivers: Vec<(usize, SharedReceiver<M>)>,
}

impl<M: Send + 'static> MeshEnds<M> {
    /// Connects every end inside the current shard's executor. Each connection completes once
    /// the peer shard connects its end too, so every shard must be connecting at the same
    /// time; all of this shard's ends connect concurrently.
    pub(crate) async fn connect(self) -> Mesh<M> {
        let sender_tasks: Vec<_> = self
            .senders
            .into_iter()
            .map(|(to, end)| (to, glommio::spawn_local(end.connect())))
            .collect();
        let receiver_tasks: Vec<_> = self
            .receivers
            .into_iter()
            .map(|(from, end)| (from, glommio::spawn_local(end.connect())))
            .collect();
        let mut senders: Vec<Option<MeshSender<M>>> = (0..self.shard_count).map(|_| None).collect();
        for (to, task) in sender_tasks {
            let inner = task.await;
            if let Some(slot) = senders.get_mut(to) {
                *slot = Some(MeshSender { to, inner });
            }
        }
        let mut receivers = Vec::with_capacity(receiver_tasks.len());
        for (from, task) in receiver_tasks {
            receivers.push((
                from,
                MeshReceiver {
                    from,
                    inner: task.await,
                },
            ));
        }
        Mesh {
            shard: self.shard,
            senders,
            receivers: Some(receivers),
        }
    }
}

/// Builds the full mesh for `shards` shards, `capacity` messages per directed channel: one
/// [`MeshEnds`] per shard, indexed by shard.
pub(crate) fn build<M: Send + 'static>(shards: usize, capacity: usize) -> Vec<MeshEnds<M>> {
    let mut ends: Vec<MeshEnds<M>> = (0..shards)
        .map(|shard| MeshEnds {
            shard,
            shard_count: shards,
            senders: Vec::with_capacity(shards.saturating_sub(1)),
            receivers: Vec::with_capacity(shards.saturating_sub(1)),
        })
        .collect();
    for from in 0..shards {
        for to in 0..shards {
            if from == to {
                continue;
            }
            let (sender, receiver) = shared_channel::new_bounded(capacity);
            ends[from].senders.push((to, sender));
            ends[to].receivers.push((from, receiver));
        }
    }
    ends
}

/// The item a failed glommio channel operation hands back.
fn channel_item<M>(error: GlommioError<M>) -> M {
    match error {
        GlommioError::Closed(ResourceType::Channel(item))
        | GlommioError::WouldBlock(ResourceType::Channel(item)) => item,
        // glommio's channel send only fails with Closed or WouldBlock, both carrying the item.
        _ => unreachable!("a glommio channel send failed without handing back its item"),
    }
}
