//! A pusher's encoder: the served view as one request body of its
//! protocol, compressed as the protocol says.

use std::io::Write;

use multiprom_collector::Served;

use crate::config::{Protocol, RemoteWriteVersion};
use crate::otlp::{OtlpEncoder, Temporality};
use crate::remote_write::{self, BodyWriter, Written};

/// One pusher's encoder. A delta encoder's last values must be those the
/// receiver accepted: it is copied before each body and put back when the
/// push fails ([`Encoder::refused`]).
#[derive(Debug)]
pub(crate) enum Encoder {
    Otlp {
        // Boxed: the other variants are a few words.
        encoder: Box<OtlpEncoder>,
        /// A delta encoder as it was before the last body.
        before: Option<Box<OtlpEncoder>>,
        gzip: bool,
    },
    RemoteWrite(BodyWriter),
    /// Remote-Write 2.0, with what the last body carried (its receiver
    /// answers what it wrote of it).
    RemoteWriteV2 {
        sent: Written,
    },
}

impl Encoder {
    pub(crate) fn new(protocol: &Protocol) -> Encoder {
        match protocol {
            Protocol::Otlp {
                temporality,
                resource,
                gzip,
            } => Encoder::Otlp {
                encoder: Box::new(OtlpEncoder::new(resource.clone(), *temporality)),
                before: None,
                gzip: *gzip,
            },
            Protocol::RemoteWrite {
                version: RemoteWriteVersion::V1,
            } => Encoder::RemoteWrite(BodyWriter::default()),
            Protocol::RemoteWrite {
                version: RemoteWriteVersion::V2,
            } => Encoder::RemoteWriteV2 {
                sent: Written::default(),
            },
        }
    }

    /// The body for `served`.
    pub(crate) fn body(&mut self, served: &Served) -> Vec<u8> {
        match self {
            Encoder::Otlp {
                encoder,
                before,
                gzip,
            } => {
                if encoder.temporality() == Temporality::Delta {
                    *before = Some(encoder.clone());
                }
                let bytes = encoder.encode(served);
                if *gzip {
                    gzip_bytes(bytes)
                } else {
                    bytes.to_vec()
                }
            }
            Encoder::RemoteWrite(writer) => writer.body(served),
            Encoder::RemoteWriteV2 { sent } => {
                let request = remote_write::write_request_v2(served);
                *sent = Written::sent(&request);
                remote_write::encode_v2(&request)
            }
        }
    }

    /// Puts a delta encoder back as it was before the last body: that body
    /// never arrived, so the next one must cover its interval too.
    pub(crate) fn refused(&mut self) {
        if let Encoder::Otlp {
            encoder, before, ..
        } = self
        {
            if let Some(before) = before.take() {
                *encoder = before;
            }
        }
    }

    /// Whether an accepted push was written, as far as the receiver says
    /// (Remote-Write 2.0's written counts; other protocols say nothing
    /// here): `Err` with why not.
    pub(crate) fn check_written(&self, written: Option<Written>) -> Result<(), String> {
        match (self, written) {
            (Encoder::RemoteWriteV2 { sent }, Some(written)) => written.check(*sent),
            _ => Ok(()),
        }
    }

    /// Notes the receiver's answer to an accepted push: OTLP's partial
    /// success (points the receiver rejected) is logged.
    pub(crate) fn accepted(&mut self, answer: &[u8]) {
        if let Encoder::Otlp { before, .. } = self {
            *before = None;
            if let Some((rejected, message)) = crate::otlp::partial_success(answer) {
                tracing::warn!("the OTLP receiver rejected {rejected} data points: {message}");
            }
        }
    }
}

fn gzip_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4 + 64),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(bytes);
    gz.finish().unwrap_or_default()
}
