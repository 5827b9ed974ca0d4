//! Merged families as `prometheus_client` `Metric` objects, equal to the ones
//! `prometheus_client.multiprocess.MultiProcessCollector.merge` returns.
//!
//! Python builds each family as `Metric(name, help, type)` (plus
//! `_multiprocess_mode` for gauges) and each sample as
//! `Sample(name, dict(labels), value)`, so timestamp, exemplar and native
//! histogram are `None`. The objects made here are the same: the same class,
//! the same attributes, equal samples, in the same order; except that a
//! counter's `_total` or a histogram's `_bucket` sample carries the
//! exemplar multiprom's writers stored for it (the latest of all files),
//! as a `prometheus_client.samples.Exemplar`, which Python's collector
//! never reads.

use std::collections::HashMap;
use std::sync::Arc;

use multiprom_collector::{FamilyType, MergedFamily, MergedSample};
use multiprom_format::Exemplar;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyList, PyString, PyTuple, PyType};
use pyo3::{intern, PyTypeInfo};

static METRIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static SAMPLE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static EXEMPLAR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Python strings for the engine's shared strings, keyed by address: the
/// engine hands out one `Arc<str>` per distinct name, label and help text, so
/// each becomes one Python `str` per conversion, not one per use.
#[derive(Default)]
struct Strings<'py> {
    by_address: HashMap<*const u8, Bound<'py, PyString>>,
}

impl<'py> Strings<'py> {
    fn get(&mut self, py: Python<'py>, s: &Arc<str>) -> Bound<'py, PyString> {
        // The `Arc`s outlive this cache (they belong to the families being
        // converted), so an address cannot be reused for another string.
        self.by_address
            .entry(s.as_ptr())
            .or_insert_with(|| PyString::new(py, s))
            .clone()
    }
}

/// The classes and callables a conversion needs, looked up once per call.
struct Classes<'py> {
    metric: Bound<'py, PyType>,
    sample: Bound<'py, PyType>,
    /// `prometheus_client.samples.Exemplar`.
    exemplar: Bound<'py, PyType>,
    /// `tuple.__new__`: builds a `Sample` (a `NamedTuple`) from its fields
    /// without running the Python-level `Sample.__new__`.
    tuple_new: Bound<'py, PyAny>,
    /// `Sample` fields after name, labels and value, all `None` here
    /// (timestamp, exemplar, native histogram in 0.26; fewer in older
    /// releases, so counted, not assumed).
    optional_fields: usize,
}

impl<'py> Classes<'py> {
    fn load(py: Python<'py>) -> PyResult<Self> {
        let sample = SAMPLE
            .import(py, "prometheus_client.samples", "Sample")?
            .clone();
        let optional_fields = sample
            .getattr(intern!(py, "_fields"))?
            .len()?
            .saturating_sub(3);
        Ok(Classes {
            metric: METRIC
                .import(py, "prometheus_client.metrics_core", "Metric")?
                .clone(),
            sample,
            exemplar: EXEMPLAR
                .import(py, "prometheus_client.samples", "Exemplar")?
                .clone(),
            tuple_new: PyTuple::type_object(py).getattr(intern!(py, "__new__"))?,
            optional_fields,
        })
    }
}

/// A family Python would not accept (`Metric` raised), skipped.
pub(crate) struct RejectedFamily {
    pub(crate) name: String,
    pub(crate) error: PyErr,
}

/// `families` as a list of `Metric` objects, in order. A family whose
/// `Metric` constructor raises (a name `prometheus_client` rejects) is left
/// out and returned in the second list, so one bad name never fails a scrape.
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    families: &[MergedFamily],
) -> PyResult<(Bound<'py, PyList>, Vec<RejectedFamily>)> {
    let classes = Classes::load(py)?;
    let mut strings = Strings::default();
    let out = PyList::empty(py);
    let mut rejected = Vec::new();
    for family in families {
        match family_to_python(py, &classes, &mut strings, family) {
            Ok(metric) => out.append(metric)?,
            Err(error) => rejected.push(RejectedFamily {
                name: family.name.to_string(),
                error,
            }),
        }
    }
    Ok((out, rejected))
}

/// Whether `prometheus_client` accepts every family's name, help and type
/// (its `Metric` constructor does not raise for any).
pub(crate) fn all_accepted(py: Python<'_>, families: &[MergedFamily]) -> PyResult<bool> {
    let classes = Classes::load(py)?;
    let mut strings = Strings::default();
    for family in families {
        let made = classes.metric.call1((
            strings.get(py, &family.name),
            strings.get(py, &family.help),
            family.family_type.as_str(),
        ));
        if made.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

fn family_to_python<'py>(
    py: Python<'py>,
    classes: &Classes<'py>,
    strings: &mut Strings<'py>,
    family: &MergedFamily,
) -> PyResult<Bound<'py, PyAny>> {
    let metric = classes.metric.call1((
        strings.get(py, &family.name),
        strings.get(py, &family.help),
        family.family_type.as_str(),
    ))?;
    // Python keeps the last file's mode on gauge families (even when the
    // mode differs between files); the attribute is there only on gauges.
    let keeps_pid = match family.gauge_mode {
        Some(mode) => {
            metric.setattr(intern!(py, "_multiprocess_mode"), mode.as_str())?;
            mode.keeps_pid()
        }
        None => false,
    };
    // Python's label dicts are `dict(tuple)` of the merge's label tuple: names
    // sorted, except that a gauge series' `pid` and a bucket's `le` are
    // appended last. Equality does not depend on it; `repr` and iteration do.
    // (One case differs: a gauge that declares a label named `pid` itself has
    // it at its sorted position in Python; the merged labels do not say so.)
    let last_label = match family.family_type {
        FamilyType::Gauge if keeps_pid => Some("pid"),
        FamilyType::Histogram => Some("le"),
        _ => None,
    };
    let samples = PyList::empty(py);
    for sample in &family.samples {
        samples.append(sample_to_python(py, classes, strings, sample, last_label)?)?;
    }
    metric.setattr(intern!(py, "samples"), samples)?;
    Ok(metric)
}

fn sample_to_python<'py>(
    py: Python<'py>,
    classes: &Classes<'py>,
    strings: &mut Strings<'py>,
    sample: &MergedSample,
    last_label: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let labels = PyDict::new(py);
    let mut last = None;
    for pair in sample.labels.iter() {
        if Some(&*pair.0) == last_label {
            last = Some(pair);
            continue;
        }
        labels.set_item(strings.get(py, &pair.0), strings.get(py, &pair.1))?;
    }
    if let Some((name, value)) = last {
        labels.set_item(strings.get(py, name), strings.get(py, value))?;
    }
    let name = strings.get(py, &sample.name);
    let value = PyFloat::new(py, sample.value);
    let exemplar = match &sample.exemplar {
        Some(exemplar) => Some(exemplar_to_python(py, classes, exemplar)?),
        None => None,
    };
    if classes.optional_fields > 3 {
        // A newer `Sample` than this code knows: let it fill in its defaults.
        let kwargs = PyDict::new(py);
        if let Some(exemplar) = exemplar {
            kwargs.set_item(intern!(py, "exemplar"), exemplar)?;
        }
        return classes.sample.call((name, labels, value), Some(&kwargs));
    }
    let none = py.None().into_bound(py);
    let fields = [
        name.into_any(),
        labels.into_any(),
        value.into_any(),
        none.clone(),
        exemplar.unwrap_or_else(|| none.clone()),
        none,
    ];
    let fields = PyTuple::new(py, &fields[..3 + classes.optional_fields])?;
    classes.tuple_new.call1((&classes.sample, fields))
}

/// `Exemplar(labels, value, timestamp)`, labels in the order they were
/// stored (as the `dict` given to `inc` or `observe`).
fn exemplar_to_python<'py>(
    py: Python<'py>,
    classes: &Classes<'py>,
    exemplar: &Exemplar,
) -> PyResult<Bound<'py, PyAny>> {
    let labels = PyDict::new(py);
    for (name, value) in &exemplar.labels {
        labels.set_item(name, value)?;
    }
    classes.exemplar.call1((
        labels,
        PyFloat::new(py, exemplar.value),
        PyFloat::new(py, exemplar.timestamp),
    ))
}
