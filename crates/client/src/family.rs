//! Labelled families: get-or-create of a child by label values.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

use crate::definition::Definition;
use crate::directory_writer::DirectoryWriter;
use crate::error::ClientError;
use crate::Metric;

pub(crate) mod sealed {
    use std::sync::Arc;

    use crate::definition::Definition;
    use crate::directory_writer::{Creator, DirectoryWriter};
    use crate::error::ClientError;
    use crate::series::Series;

    /// How a family makes and finds its children. Not implementable outside
    /// this crate.
    pub trait Member: Clone + Send + Sync + 'static {
        /// Creates the child with `label_values` (its entries at 0).
        fn create(
            writer: &Arc<DirectoryWriter>,
            definition: &Arc<Definition>,
            label_values: &[&str],
            creator: &mut Creator<'_>,
        ) -> Result<Self, ClientError>;
        /// The child's entries.
        fn series(&self) -> &Arc<Series>;
    }
}

/// A metric with label names; each distinct tuple of label values is a
/// child ([`Counter`](crate::Counter), [`Gauge`](crate::Gauge), ...).
///
/// [`Family::labels`] creates a child on first use (its entries appear in the
/// file at 0 right then, as in Python) and returns a handle to it. The handle
/// is cheap to clone and to keep: keep it where you update in a hot loop, and
/// the lookup (a read lock and a hash of the values) is skipped entirely.
pub struct Family<M> {
    table: Arc<ChildTable<M>>,
}

/// A family's definition and its children by label values, shared by every
/// clone of the [`Family`].
struct ChildTable<M> {
    writer: Arc<DirectoryWriter>,
    definition: Arc<Definition>,
    hasher: RandomState,
    /// Children by the hash of their label values; collisions share a Vec.
    children: RwLock<HashMap<u64, Vec<M>, BuildHasherDefault<PrehashedHasher>>>,
}

impl<M> Clone for Family<M> {
    fn clone(&self) -> Self {
        Family {
            table: Arc::clone(&self.table),
        }
    }
}

impl<M: Metric> Family<M> {
    pub(crate) fn new(writer: Arc<DirectoryWriter>, definition: Arc<Definition>) -> Family<M> {
        Family {
            table: Arc::new(ChildTable {
                writer,
                definition,
                hasher: RandomState::new(),
                children: RwLock::new(HashMap::default()),
            }),
        }
    }

    /// The child with these label values (in the order of the label names),
    /// created if new.
    ///
    /// Errors: the wrong number of values, or the child's entries could not
    /// be written (directory gone, permission denied, disk full).
    pub fn labels<S: AsRef<str>>(&self, values: &[S]) -> Result<M, ClientError> {
        let definition = &self.table.definition;
        if values.len() != definition.label_names.len() {
            return Err(ClientError::LabelCount {
                metric: definition.family.clone(),
                expected: definition.label_names.len(),
                got: values.len(),
            });
        }
        let hash = self.hash(values);
        {
            let children = self
                .table
                .children
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(child) = find(&children, hash, values) {
                return Ok(child.clone());
            }
        }
        let mut children = self
            .table
            .children
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(child) = find(&children, hash, values) {
            return Ok(child.clone());
        }
        let values: Vec<&str> = values.iter().map(AsRef::as_ref).collect();
        let writer = &self.table.writer;
        let child =
            writer.with_creator(|creator| M::create(writer, definition, &values, creator))?;
        children.entry(hash).or_default().push(child.clone());
        Ok(child)
    }

    /// The family name (a counter's without `_total`).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.table.definition.family
    }

    /// The label names, in the order [`Family::labels`] takes values.
    #[must_use]
    pub fn label_names(&self) -> &[String] {
        &self.table.definition.label_names
    }

    /// Number of children created so far.
    #[must_use]
    pub fn len(&self) -> usize {
        let children = self
            .table
            .children
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        children.values().map(Vec::len).sum()
    }

    /// Whether no child has been created yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hash<S: AsRef<str>>(&self, values: &[S]) -> u64 {
        let mut hasher = self.table.hasher.build_hasher();
        for value in values {
            value.as_ref().hash(&mut hasher);
        }
        hasher.finish()
    }
}

fn find<'m, M: Metric, S: AsRef<str>>(
    children: &'m HashMap<u64, Vec<M>, BuildHasherDefault<PrehashedHasher>>,
    hash: u64,
    values: &[S],
) -> Option<&'m M> {
    children.get(&hash)?.iter().find(|child| {
        let have = child.series().label_values();
        have.len() == values.len() && have.iter().zip(values).all(|(a, b)| **a == *b.as_ref())
    })
}

impl<M: Metric> fmt::Debug for Family<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.table.definition.family)
            .field("kind", &self.table.definition.kind)
            .field("label_names", &self.table.definition.label_names)
            .field("children", &self.len())
            .finish()
    }
}

/// The map's keys are already hashes: pass them through.
#[derive(Default)]
struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `u64: Hash`; fold anything else.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
