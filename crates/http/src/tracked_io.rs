//! [`TrackedIo`]: a connection's socket as hyper sees it, telling the
//! connection's [`ConnectionState`] what happens on it, and giving up on a
//! response its client leaves unread (the write timeout).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::connections::{ConnectionState, ReadOutcome};

/// A socket whose reads and writes are reported to its connection's state.
///
/// A response may wait for its client to read for `write_timeout` in all;
/// then writing fails with [`io::ErrorKind::TimedOut`] and hyper drops the
/// connection. The time counts only while writes wait, so a slow handler
/// is not the client's fault, and a client that reads a trickle at a time
/// is not let off: the waits add up.
#[derive(Debug)]
pub(crate) struct TrackedIo<T> {
    io: T,
    state: Arc<ConnectionState>,
    write_timeout: Duration,
    /// The request whose response the waits below belong to.
    request: u64,
    /// What earlier waits of this response added up to.
    waited: Duration,
    /// Since when the current write waits.
    blocked_since: Option<Instant>,
    /// Fires when the waits reach the timeout; made on the first wait.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> TrackedIo<T> {
    pub(crate) fn new(io: T, state: Arc<ConnectionState>, write_timeout: Duration) -> Self {
        TrackedIo {
            io,
            state,
            write_timeout,
            request: 0,
            waited: Duration::ZERO,
            blocked_since: None,
            timer: None,
        }
    }

    /// After a write: a result ends a wait; `Pending` starts or goes on with
    /// one, and ends in an error once the waits reach the timeout.
    fn after_write<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() {
            if let Some(since) = self.blocked_since.take() {
                self.waited += since.elapsed();
                self.state.write_unblocked();
            }
            return result;
        }
        let request = self.state.requests();
        if request != self.request {
            // Another response: its waits count afresh.
            self.request = request;
            self.waited = Duration::ZERO;
        }
        let since = *self.blocked_since.get_or_insert_with(|| {
            self.state.write_blocked();
            Instant::now()
        });
        let Some(deadline) = since.checked_add(self.write_timeout.saturating_sub(self.waited))
        else {
            // Too far off to ever come.
            return Poll::Pending;
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client left the response unread for {:?}",
                    self.write_timeout
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let (before, room) = (buf.filled().len(), buf.remaining() > 0);
        let result = Pin::new(&mut this.io).poll_read(cx, buf);
        this.state.read(match &result {
            Poll::Ready(Ok(())) if buf.filled().len() > before => ReadOutcome::Bytes,
            Poll::Ready(Ok(())) if !room => ReadOutcome::Nothing,
            Poll::Ready(_) => ReadOutcome::End,
            Poll::Pending => ReadOutcome::Nothing,
        });
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    /// hyper flushes once its own buffer is written out.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_flush(cx);
        let result = this.after_write(cx, result);
        if matches!(result, Poll::Ready(Ok(()))) {
            this.state.flushed();
        }
        result
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_shutdown(cx);
        this.after_write(cx, result)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn tracked<T>(io: T, timeout: Duration) -> (TrackedIo<T>, Arc<ConnectionState>) {
        let state = crate::connections::Connections::new().state();
        state.request_started();
        (TrackedIo::new(io, Arc::clone(&state), timeout), state)
    }

    /// `future`'s output, or a panic if it has not come within a (paused)
    /// minute: a test that fails must not hang.
    async fn within_a_minute<F: Future>(future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(60), future)
            .await
            .expect("not done within a minute")
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_left_unread_times_out() {
        let (ours, _theirs) = duplex(16);
        let (mut io, _state) = tracked(ours, Duration::from_secs(10));
        let started = Instant::now();
        let err = within_a_minute(io.write_all(&[0; 64])).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn waits_add_up_over_a_response() {
        let (ours, mut theirs) = duplex(16);
        let (mut io, _state) = tracked(ours, Duration::from_secs(10));
        // The client takes 16 bytes every 4 s: each wait is short of the
        // timeout, their sum is not.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            loop {
                tokio::time::sleep(Duration::from_secs(4)).await;
                if theirs.read(&mut buf).await.unwrap() == 0 {
                    break;
                }
            }
        });
        let started = Instant::now();
        let err = within_a_minute(io.write_all(&[0; 256])).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(
            started.elapsed() <= Duration::from_secs(12),
            "{:?}",
            started.elapsed()
        );
        drop(io);
        within_a_minute(reader).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn each_response_has_its_own_time() {
        let (ours, mut theirs) = duplex(16);
        let (mut io, state) = tracked(ours, Duration::from_secs(10));
        let mut buf = [0u8; 16];
        for _ in 0..3 {
            // Blocked for 6 s, then read: 18 s of waits in all, over three
            // responses.
            let write = io.write_all(&[0; 32]);
            tokio::pin!(write);
            assert!(tokio::time::timeout(Duration::from_secs(6), write.as_mut())
                .await
                .is_err());
            theirs.read_exact(&mut buf).await.unwrap();
            within_a_minute(write).await.unwrap();
            theirs.read_exact(&mut buf).await.unwrap();
            state.response_ended();
            state.request_started();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reads_and_flushes_move_the_phase() {
        let (ours, mut theirs) = duplex(64);
        let mut connections = crate::connections::Connections::new();
        let state = connections.state();
        let mut io = TrackedIo::new(ours, Arc::clone(&state), Duration::from_secs(10));
        let task = tokio::spawn(std::future::pending::<()>()).abort_handle();
        connections.add(Arc::clone(&state), task.clone());
        theirs.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 3];
        io.read_exact(&mut buf).await.unwrap();
        state.request_started();
        io.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        // Written, but the response is not over: not to be closed.
        io.flush().await.unwrap();
        assert_eq!(connections.close(1), 0);
        state.response_ended();
        io.flush().await.unwrap();
        // Idle again: the first to go at the cap.
        assert_eq!(connections.close(1), 1);
    }
}
