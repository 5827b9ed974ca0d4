//! [`TrackedService`]: a connection's service, telling the connection's
//! [`ConnectionState`] when a request starts and when its response is done
//! with.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use hyper::Response;

use crate::connections::ConnectionState;

/// Wraps the service hyper calls for each request on one connection.
#[derive(Debug)]
pub(crate) struct TrackedService<S> {
    inner: S,
    state: Arc<ConnectionState>,
}

impl<S> TrackedService<S> {
    pub(crate) fn new(inner: S, state: Arc<ConnectionState>) -> Self {
        TrackedService { inner, state }
    }
}

/// Ends the response in the connection's state when dropped: with its body
/// once hyper has written or dropped it, or with the request's future if no
/// response came.
#[derive(Debug)]
struct ResponseOpen(Arc<ConnectionState>);

impl Drop for ResponseOpen {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

impl<S, R, B> Service<R> for TrackedService<S>
where
    S: Service<R, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Body + Unpin,
{
    type Response = Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, request: R) -> Self::Future {
        self.state.request_started();
        let open = ResponseOpen(Arc::clone(&self.state));
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| TrackedBody { body, _open: open }))
        })
    }
}

/// A response body that ends its response in the connection's state when
/// hyper is done with it.
#[derive(Debug)]
pub(crate) struct TrackedBody<B> {
    body: B,
    _open: ResponseOpen,
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
