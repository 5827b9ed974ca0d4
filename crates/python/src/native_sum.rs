//! `multiprom._native.NativeSum`: the `_sum` value of a histogram written
//! by multiprom's value class, recording each observation natively too.
//!
//! prometheus_client's `Histogram.observe(amount)` calls
//! `self._sum.inc(amount)` exactly once per observation. With multiprom's
//! writer, putting this object in `_sum`'s place records the native
//! observation in the same Rust call as the classic sum, with no Python
//! wrapper around `observe`: the opt-in's cost per observation is then the
//! native recording alone. Everything else is the value's own.

use pyo3::intern;
use pyo3::prelude::*;

use crate::native_series::NativeSeriesHandle;
use crate::value::Value;

/// A histogram's `_sum` value and its native series.
#[pyclass(frozen, module = "multiprom._native", name = "NativeSum")]
pub(crate) struct NativeSum {
    value: Py<Value>,
    series: Py<NativeSeriesHandle>,
}

#[pymethods]
impl NativeSum {
    #[new]
    fn new(value: Py<Value>, series: Py<NativeSeriesHandle>) -> Self {
        NativeSum { value, series }
    }

    /// The classic sum first: a failure there raises as before, and the
    /// observation is then not recorded natively either.
    fn inc(&self, py: Python<'_>, amount: f64) -> PyResult<()> {
        self.value.get().inc(py, amount)?;
        self.series.get().record(py, amount);
        Ok(())
    }

    #[pyo3(signature = (value, timestamp = None))]
    fn set<'py>(
        &self,
        py: Python<'py>,
        value: f64,
        timestamp: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.value
            .bind(py)
            .call_method1(intern!(py, "set"), (value, timestamp))
    }

    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.value.bind(py).call_method0(intern!(py, "get"))
    }

    fn set_exemplar<'py>(
        &self,
        py: Python<'py>,
        exemplar: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.value
            .bind(py)
            .call_method1(intern!(py, "set_exemplar"), (exemplar,))
    }

    fn get_exemplar<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.value
            .bind(py)
            .call_method0(intern!(py, "get_exemplar"))
    }

    /// The value it wraps.
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<Value> {
        self.value.clone_ref(py)
    }
}
