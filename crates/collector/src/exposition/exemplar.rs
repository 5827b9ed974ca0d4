//! An exemplar after its sample's value, as `prometheus_client`'s
//! `_compose_exemplar_string` writes it (OpenMetrics only).

use multiprom_format::{write_float_to_go_string, write_python_repr, Exemplar};

use super::names::push_escaped;

/// Appends ` # {name="value",...} <value> <timestamp>`: labels sorted by
/// name, names as they are, values escaped (`\\`, `\n`, `\"`), the value
/// as `floatToGoString`, the timestamp as Python prints a float.
pub(crate) fn push_exemplar(out: &mut String, exemplar: &Exemplar) {
    let mut labels: Vec<&(String, String)> = exemplar.labels.iter().collect();
    labels.sort();
    out.push_str(" # {");
    for (i, (name, value)) in labels.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        push_escaped(out, value, true);
        out.push('"');
    }
    out.push_str("} ");
    write_float_to_go_string(out, exemplar.value);
    out.push(' ');
    write_python_repr(out, exemplar.timestamp);
}
