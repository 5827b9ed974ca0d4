//! This process's writer of one multiprocess directory: its open files,
//! every key created so far, and what has been registered. One per
//! (directory, identifier setting) per process, so two registries never own
//! the same file.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use multiprom_format::fork::fork_generation;
use multiprom_format::layout::MAX_KEY_LEN;
use multiprom_format::{
    ExemplarSlot, FileWriter, MetricKind, NativeHistogramConfig, NativeSeries, ProcessFiles,
    ValueSlot, WriteError,
};

use crate::definition::Definition;
use crate::error::ClientError;

/// How the `<id>` in file names is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdSource {
    /// The pid, read again after every fork (Python's default).
    Pid,
    /// A fixed identifier; after a fork the child uses `<id>-<pid>`, since
    /// two processes must never write the same file.
    Fixed(String),
}

impl IdSource {
    fn id_for(&self, generation: u64, original_generation: u64) -> String {
        match self {
            IdSource::Pid => std::process::id().to_string(),
            IdSource::Fixed(id) if generation == original_generation => id.clone(),
            IdSource::Fixed(id) => format!("{id}-{}", std::process::id()),
        }
    }
}

/// A registered metric: its definition, and the handle handed out again when
/// the same definition is registered twice.
struct Registered {
    definition: Arc<Definition>,
    handle: Box<dyn Any + Send + Sync>,
}

/// The mutable part of a [`DirectoryWriter`]: the open files and what was
/// created and registered in them, behind one mutex (never taken on the
/// update path).
struct FilesAndRegistrations {
    /// Fork generation that `writers` and every key in `known` are current for.
    generation: u64,
    /// Fork generation `files` belong to (may be ahead of `generation`
    /// while a re-creation after fork is incomplete).
    files_generation: u64,
    /// This process's files, named after its identifier; an exemplar file
    /// that could not be opened is not tried again until the next fork.
    files: ProcessFiles,
    /// Every key created, in creation order: after a fork the child re-creates
    /// all of them in its own files, as Python does.
    known: Vec<(MetricKind, Arc<str>)>,
    /// Fork generation whose native file holds every key of `known_natives`.
    natives_generation: u64,
    /// Every native series created, as `known` for values.
    known_natives: Vec<(Arc<str>, NativeHistogramConfig)>,
    registered: HashMap<String, Registered>,
    /// Sample name -> family that claims it.
    claimed: HashMap<String, String>,
}

/// This process's writer of one directory, shared by a registry, its
/// metrics, families and every handle.
// `pub` (in a private module) because the sealed `Member` trait names it.
pub struct DirectoryWriter {
    dir: PathBuf,
    id_source: IdSource,
    original_generation: u64,
    state: Mutex<FilesAndRegistrations>,
    /// Last fork generation for which a failure to re-create files was printed.
    reported_generation: AtomicU64,
    /// Last fork generation for which a failure to store exemplars was printed.
    reported_exemplar_generation: AtomicU64,
    /// Last fork generation for which a failure to record natively was printed.
    reported_native_generation: AtomicU64,
}

impl std::fmt::Debug for DirectoryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryWriter")
            .field("dir", &self.dir)
            .field("id_source", &self.id_source)
            .finish_non_exhaustive()
    }
}

impl DirectoryWriter {
    fn new(dir: PathBuf, id_source: IdSource, generation: u64) -> DirectoryWriter {
        let files = ProcessFiles::new(id_source.id_for(generation, generation));
        DirectoryWriter {
            dir,
            id_source,
            original_generation: generation,
            state: Mutex::new(FilesAndRegistrations {
                generation,
                files_generation: generation,
                files,
                known: Vec::new(),
                natives_generation: generation,
                known_natives: Vec::new(),
                registered: HashMap::new(),
                claimed: HashMap::new(),
            }),
            reported_generation: AtomicU64::new(u64::MAX),
            reported_exemplar_generation: AtomicU64::new(u64::MAX),
            reported_native_generation: AtomicU64::new(u64::MAX),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn id_source(&self) -> &IdSource {
        &self.id_source
    }

    fn lock(&self) -> MutexGuard<'_, FilesAndRegistrations> {
        // No code panics while holding this lock with the state half-updated;
        // a panic elsewhere must not disable metrics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The identifier in this process's file names (changes after a fork).
    pub(crate) fn process_id(&self) -> String {
        let mut state = self.lock();
        // A failure is reported where it matters (on creation); here the
        // caller only wants the name.
        let _ = self.sync_fork(&mut state);
        state.files.id().to_owned()
    }

    /// Moves to the current fork generation: in a forked child, opens files
    /// under the child's identifier and re-creates every known key in them
    /// (Python's `__check_for_pid_change`). Never writes the parent's files.
    fn sync_fork(&self, state: &mut FilesAndRegistrations) -> Result<(), ClientError> {
        let generation = fork_generation();
        if generation == state.generation {
            return Ok(());
        }
        self.switch_files(state, generation);
        for i in 0..state.known.len() {
            let (kind, key) = state.known[i].clone();
            value_file(&self.dir, state, kind)?.slot(&key)?;
        }
        state.generation = generation;
        Ok(())
    }

    /// In a process forked since the files were opened, drops the inherited
    /// writers and names files with this process's identifier.
    fn switch_files(&self, state: &mut FilesAndRegistrations, generation: u64) {
        if state.files_generation != generation {
            // Dropping the inherited writers only unmaps and closes in this
            // process; the parent's files are untouched.
            state.files =
                ProcessFiles::new(self.id_source.id_for(generation, self.original_generation));
            state.files_generation = generation;
        }
    }

    /// Re-creates files after a fork now rather than on the first update.
    pub(crate) fn reopen_after_fork(&self) -> Result<(), ClientError> {
        let mut state = self.lock();
        self.sync_fork(&mut state)?;
        self.sync_natives(&mut state)
    }

    /// As [`DirectoryWriter::sync_fork`] for native series, separately:
    /// a native file that cannot be made must never stop the values.
    fn sync_natives(&self, state: &mut FilesAndRegistrations) -> Result<(), ClientError> {
        let generation = fork_generation();
        if generation == state.natives_generation {
            return Ok(());
        }
        self.switch_files(state, generation);
        for i in 0..state.known_natives.len() {
            let (key, config) = state.known_natives[i].clone();
            state.files.native_file(&self.dir)?.series(&key, config)?;
        }
        state.natives_generation = generation;
        Ok(())
    }

    /// The native series of `key` in this (forked) process's own native file.
    pub(crate) fn rebind_native(
        &self,
        key: &str,
        config: NativeHistogramConfig,
    ) -> Result<NativeSeries, ClientError> {
        let mut state = self.lock();
        self.sync_natives(&mut state)?;
        Ok(state.files.native_file(&self.dir)?.series(key, config)?)
    }

    /// Prints a failure to record natively after a fork, once per fork:
    /// native observations are dropped, the classic part is still counted.
    pub(crate) fn report_native_failure(&self, err: &ClientError) {
        let generation = fork_generation();
        if self
            .reported_native_generation
            .swap(generation, Ordering::Relaxed)
            != generation
        {
            eprintln!(
                "multiprom-client: after fork(), cannot create this process's native histogram file in {}: {err}; native observations are dropped, classic buckets are still counted",
                self.dir.display()
            );
        }
    }

    /// Registers `definition`, or returns the handle of an identical earlier
    /// registration. `make` builds the handle with the state locked.
    pub(crate) fn register<M: Clone + Send + Sync + 'static>(
        self: &Arc<Self>,
        definition: Definition,
        make: impl FnOnce(&Arc<Self>, Arc<Definition>, &mut Creator<'_>) -> Result<M, ClientError>,
    ) -> Result<M, ClientError> {
        let mut state = self.lock();
        if let Some(existing) = state.registered.get(&definition.family) {
            if *existing.definition == definition {
                if let Some(handle) = existing.handle.downcast_ref::<M>() {
                    return Ok(handle.clone());
                }
            }
            return Err(ClientError::Conflict {
                name: definition.family.clone(),
                existing: existing.definition.to_string(),
                requested: definition.to_string(),
            });
        }
        let claimed = definition.claimed_names();
        for sample in &claimed {
            if let Some(other) = state.claimed.get(sample) {
                return Err(ClientError::NameClash {
                    name: definition.family.clone(),
                    sample: sample.clone(),
                    other: other.clone(),
                });
            }
        }
        let definition = Arc::new(definition);
        let handle = make(
            self,
            Arc::clone(&definition),
            &mut Creator {
                writer: self,
                state: &mut state,
            },
        )?;
        for sample in claimed {
            state.claimed.insert(sample, definition.family.clone());
        }
        state.registered.insert(
            definition.family.clone(),
            Registered {
                definition,
                handle: Box::new(handle.clone()),
            },
        );
        Ok(handle)
    }

    /// Runs `create` (which makes one child's entries) with the state locked.
    pub(crate) fn with_creator<R>(&self, create: impl FnOnce(&mut Creator<'_>) -> R) -> R {
        let mut state = self.lock();
        create(&mut Creator {
            writer: self,
            state: &mut state,
        })
    }

    /// The slots of `keys` in this (forked) process's own files.
    pub(crate) fn rebind(
        &self,
        kind: MetricKind,
        keys: &[Arc<str>],
    ) -> Result<Box<[ValueSlot]>, ClientError> {
        let mut state = self.lock();
        self.sync_fork(&mut state)?;
        let writer = value_file(&self.dir, &mut state, kind)?;
        keys.iter()
            .map(|key| writer.slot(key).map_err(ClientError::from))
            .collect()
    }

    /// Prints a failure to re-create files after a fork, once per fork. This
    /// is the one failure an update cannot return: the update is dropped
    /// (never written to the parent's file).
    pub(crate) fn report_fork_failure(&self, err: &ClientError) {
        let generation = fork_generation();
        if self.reported_generation.swap(generation, Ordering::Relaxed) != generation {
            eprintln!(
                "multiprom-client: after fork(), cannot create this process's metric files in {}: {err}; updates are dropped until that succeeds",
                self.dir.display()
            );
        }
    }
}

impl DirectoryWriter {
    /// The exemplar slot of `key` in this process's exemplar file of
    /// `kind`, opening the file (and the `exemplars` subdirectory) on first
    /// use. `None` when exemplars cannot be stored: the failure is printed
    /// once per fork generation, and the caller drops the exemplar (its
    /// value update is not affected).
    pub(crate) fn exemplar_slot(&self, kind: MetricKind, key: &str) -> Option<ExemplarSlot> {
        let mut state = self.lock();
        let slot = self.sync_fork(&mut state).and_then(|()| {
            match state.files.exemplar_file(&self.dir, kind)? {
                Some(writer) => Ok(Some(writer.slot(key)?)),
                // Failed earlier in this generation, already reported.
                None => Ok(None),
            }
        });
        drop(state);
        slot.unwrap_or_else(|err| {
            self.report_exemplar_failure(&err);
            None
        })
    }

    /// Prints a failure to store exemplars, once per fork generation.
    fn report_exemplar_failure(&self, err: &ClientError) {
        let generation = fork_generation();
        if self
            .reported_exemplar_generation
            .swap(generation, Ordering::Relaxed)
            != generation
        {
            eprintln!(
                "multiprom-client: cannot store exemplars in {}: {err}; exemplars are dropped, values are still counted",
                self.dir.display()
            );
        }
    }
}

/// A child's entries, just created (at 0) in this process's files.
pub(crate) struct NewEntries {
    /// The entries' keys, in Python's order.
    pub(crate) keys: Box<[Arc<str>]>,
    /// The fork generation the slots belong to.
    pub(crate) generation: u64,
    /// The entries' value slots, in the order of `keys`.
    pub(crate) slots: Box<[ValueSlot]>,
}

/// Creates entries while the state is locked (registration holds the lock).
// `pub` (in a private module) because the sealed `Member` trait names it.
pub struct Creator<'a> {
    writer: &'a DirectoryWriter,
    state: &'a mut FilesAndRegistrations,
}

impl std::fmt::Debug for Creator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Creator").finish_non_exhaustive()
    }
}

impl Creator<'_> {
    /// Creates the entries of `definition`'s child with `label_values`.
    pub(crate) fn entries(
        &mut self,
        definition: &Definition,
        label_values: &[&str],
    ) -> Result<NewEntries, ClientError> {
        let directory = self.writer;
        directory.sync_fork(self.state)?;
        let kind = definition.kind;
        let keys: Box<[Arc<str>]> = definition
            .keys(label_values)
            .into_iter()
            .map(Arc::from)
            .collect();
        // A key readers refuse would make the whole file bad for them (every
        // series of this process gone): refused here, before any is written.
        if let Some(key) = keys.iter().find(|key| key.len() > MAX_KEY_LEN) {
            return Err(WriteError::KeyTooLong { len: key.len() }.into());
        }
        let writer = value_file(&directory.dir, self.state, kind)?;
        let slots = keys
            .iter()
            .map(|key| writer.slot(key))
            .collect::<Result<Box<[ValueSlot]>, _>>()?;
        self.state
            .known
            .extend(keys.iter().map(|key| (kind, Arc::clone(key))));
        Ok(NewEntries {
            keys,
            generation: self.state.generation,
            slots,
        })
    }
}

impl Creator<'_> {
    /// Creates the native series of `key` (empty) in this process's native
    /// histogram file, opening the file on first use; returns it with the
    /// fork generation it belongs to.
    pub(crate) fn native_series(
        &mut self,
        key: &str,
        config: NativeHistogramConfig,
    ) -> Result<(NativeSeries, u64), ClientError> {
        let directory = self.writer;
        directory.sync_natives(self.state)?;
        let series = self
            .state
            .files
            .native_file(&directory.dir)?
            .series(key, config)?;
        self.state.known_natives.push((Arc::from(key), config));
        Ok((series, self.state.natives_generation))
    }
}

/// The `*.db` file of `kind` for this process, opened on first use. A
/// corrupt file left under this identifier is moved aside and a new one
/// begun, as every multiprom writer does; the move is printed.
fn value_file<'s>(
    dir: &Path,
    state: &'s mut FilesAndRegistrations,
    kind: MetricKind,
) -> Result<&'s mut FileWriter, ClientError> {
    let (file, moved) = state.files.value_file(dir, kind)?;
    if let Some(moved) = moved {
        eprintln!("multiprom-client: {moved}");
    }
    Ok(file)
}

/// Process-wide table of open registries, so that building a registry twice
/// for the same directory shares one set of files (two writers on one file
/// would overwrite each other's entries).
pub(crate) fn directory_writer_for(
    dir: PathBuf,
    id_source: IdSource,
    generation: u64,
) -> Arc<DirectoryWriter> {
    static OPEN: Mutex<Vec<Weak<DirectoryWriter>>> = Mutex::new(Vec::new());
    let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
    open.retain(|w| w.strong_count() > 0);
    if let Some(existing) = open
        .iter()
        .filter_map(Weak::upgrade)
        .find(|s| s.dir == dir && s.id_source == id_source)
    {
        return existing;
    }
    let writer = Arc::new(DirectoryWriter::new(dir, id_source, generation));
    open.push(Arc::downgrade(&writer));
    writer
}
