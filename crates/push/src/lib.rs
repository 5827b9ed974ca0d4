//! Push a directory's served view ([`multiprom_collector::ServedView`]) to a
//! receiver: OTLP/HTTP and Prometheus Remote-Write.
