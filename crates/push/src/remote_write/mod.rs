//! Placeholder until the Remote-Write encoder lands.
#![allow(missing_docs, unreachable_pub, dead_code)]
use multiprom_collector::Served;
pub struct WriteRequest;
pub fn write_request(_s: &Served) -> WriteRequest {
    WriteRequest
}
pub fn encode(_r: &WriteRequest) -> Vec<u8> {
    Vec::new()
}
