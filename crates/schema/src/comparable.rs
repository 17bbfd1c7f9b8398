//! Order-preserving ("memcomparable") byte encoding of serialized values,
//! for clustering keys in sorted storage.
//!
//! Invariants, for valid values `a`, `b` of a type (the tests check them on
//! random values of every type):
//! - `memcmp(encode(a), encode(b))` has the sign of [`value::compare`],
//!   reversed when `descending`.
//! - Every encoding is prefix-free (self-delimiting): no encoding is a
//!   proper prefix of another. So concatenated components compare
//!   component by component, and a key with fewer components sorts before
//!   its extensions.
//! - Numerically equal values encode identically (`1.0` and `1.00`,
//!   non-minimal varints, every NaN), as they compare equal.
//!
//! Descending components have every byte inverted. That reverses the order
//! of prefix-free encodings and keeps them prefix-free, which is why the
//! escaping below uses a two-byte terminator that cannot occur inside.
//!
//! [`value::compare`]: crate::value::compare

use crate::types::CqlType;
use crate::value::{bignum, double_key, float_key, timeuuid_key, uuid_key, NormalDecimal, Reader};
use crate::vector::VectorReader;
use std::cmp::Ordering;

/// Appends the encoding of one serialized value. Bytes that are not a valid
/// value of `ty` are encoded bytewise (escaped) rather than rejected;
/// callers validate before building keys.
pub fn encode(ty: &CqlType, value: &[u8], descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    if encode_ascending(ty, value, out).is_none() {
        out.truncate(start);
        escape(value, out);
    }
    if descending {
        out[start..].iter_mut().for_each(|b| *b = !*b);
    }
}

/// The encoding of a whole key: `(type, serialized value, descending)` per
/// component, concatenated.
pub fn encode_key<'a>(components: impl IntoIterator<Item = (&'a CqlType, &'a [u8], bool)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (ty, value, descending) in components {
        encode(ty, value, descending, &mut out);
    }
    out
}

/// Whether the empty value of `ty` has an encoding that keeps the
/// invariants above. Escaped (variable-length) types do; fixed-size and
/// numeric encodings use every byte string of their length, so an empty
/// value could only be encoded as a prefix of some other value's encoding.
pub fn encodes_empty(ty: &CqlType) -> bool {
    matches!(ty.unfrozen(), CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Duration)
}

fn encode_ascending(ty: &CqlType, v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    match ty {
        CqlType::Frozen(inner) => return encode_ascending(inner, v, out),
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Duration => escape(v, out),
        CqlType::Boolean => out.push(u8::from(fixed::<1>(v)?[0] != 0)),
        CqlType::Tinyint => sign_flipped::<1>(v, out)?,
        CqlType::Smallint => sign_flipped::<2>(v, out)?,
        CqlType::Int => sign_flipped::<4>(v, out)?,
        CqlType::Bigint | CqlType::Counter | CqlType::Time | CqlType::Timestamp => sign_flipped::<8>(v, out)?,
        CqlType::Date => out.extend_from_slice(&fixed::<4>(v)?),
        CqlType::Float => out.extend_from_slice(&float_key(f32::from_be_bytes(fixed(v)?)).to_be_bytes()),
        CqlType::Double => out.extend_from_slice(&double_key(f64::from_be_bytes(fixed(v)?)).to_be_bytes()),
        CqlType::Uuid => out.extend_from_slice(&uuid_key(fixed(v)?)),
        CqlType::Timeuuid => out.extend_from_slice(&timeuuid_key(fixed(v)?)),
        CqlType::Varint => encode_varint(v, out)?,
        CqlType::Decimal => encode_decimal(v, out)?,
        CqlType::List(elem) | CqlType::Set(elem) => encode_elements(&[elem], v, out)?,
        CqlType::Map(key, value) => encode_elements(&[key, value], v, out)?,
        CqlType::Tuple(fields) => encode_tuple(fields.iter(), v, out)?,
        CqlType::Udt(udt) => encode_user_type(udt.field_types(), v, out)?,
        CqlType::Vector(elem, dimension) => encode_vector(elem, *dimension, v, out)?,
    }
    Some(())
}

fn fixed<const N: usize>(v: &[u8]) -> Option<[u8; N]> {
    v.try_into().ok()
}

/// Variable-length bytes: 0x00 becomes 0x00 0xFF and the end is 0x00 0x00,
/// which sorts below any continuation, so a string sorts before its
/// extensions and the end is unambiguous.
fn escape(v: &[u8], out: &mut Vec<u8>) {
    for &b in v {
        if b == 0 {
            out.extend_from_slice(&[0x00, 0xFF]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

/// Big-endian two's complement with the sign bit flipped sorts unsigned.
fn sign_flipped<const N: usize>(v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut bytes = fixed::<N>(v)?;
    bytes[0] ^= 0x80;
    out.extend_from_slice(&bytes);
    Some(())
}

/// Sign byte (0x00 negative, 0x01 otherwise), then the minimal length
/// (inverted for negatives: longer is more negative), then the minimal
/// two's complement bytes, whose unsigned order is numeric at equal length.
fn encode_varint(v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let v = bignum::minimal(v);
    if v.is_empty() {
        return None;
    }
    let len = u32::try_from(v.len()).ok()?;
    if bignum::is_negative(v) {
        out.push(0x00);
        out.extend_from_slice(&(!len).to_be_bytes());
    } else {
        out.push(0x01);
        out.extend_from_slice(&len.to_be_bytes());
    }
    out.extend_from_slice(v);
    Some(())
}

/// Zero is the single byte 0x01. Otherwise a sign byte (0x00 negative,
/// 0x02 positive), then the normalized value `0.d1d2… × 10^exponent`: the
/// exponent as a sign-flipped i64, the digits two per byte as `10a + b + 1`
/// (a missing last digit counts as 0, harmless because normalized digits
/// never end in 0), then 0x00. Negatives invert everything after the sign
/// byte, so a larger magnitude sorts lower.
fn encode_decimal(v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let decimal = NormalDecimal::from_bytes(v).ok()?;
    let negative = match decimal.sign {
        Ordering::Equal => {
            out.push(0x01);
            return Some(());
        }
        Ordering::Less => true,
        Ordering::Greater => false,
    };
    out.push(if negative { 0x00 } else { 0x02 });
    let body = out.len();
    out.extend_from_slice(&((decimal.exponent as u64) ^ (1 << 63)).to_be_bytes());
    for pair in decimal.digits.chunks(2) {
        let high = pair.first().copied().unwrap_or(0);
        let low = pair.get(1).copied().unwrap_or(0);
        out.push(high * 10 + low + 1);
    }
    out.push(0x00);
    if negative {
        out[body..].iter_mut().for_each(|b| *b = !*b);
    }
    Some(())
}

/// Frozen collections: 0x01 before each element (or map entry), 0x00 at
/// the end, so a collection sorts before its extensions.
fn encode_elements(group: &[&CqlType], v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut reader = Reader::new(v);
    let count = reader.read_count("size").ok()?;
    for _ in 0..count {
        out.push(0x01);
        for elem in group {
            encode_ascending(elem, reader.read_element("element").ok()?, out)?;
        }
    }
    out.push(0x00);
    reader.is_empty().then_some(())
}

/// Tuples: per field of the type, 0x00 for null or missing (nulls sort
/// first, and missing trailing fields equal nulls) or 0x01 and the field.
fn encode_tuple<'t>(fields: impl Iterator<Item = &'t CqlType>, v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut reader = Reader::new(v);
    for field in fields {
        let item = if reader.is_empty() { None } else { reader.read_item("field").ok()? };
        match item {
            None => out.push(0x00),
            Some(raw) => {
                out.push(0x01);
                encode_ascending(field, raw, out)?;
            }
        }
    }
    reader.is_empty().then_some(())
}

/// User types: each field up to the last one that is not null, 0x01 for
/// null or 0x02 and the field, then 0x00. Unlike a tuple's, the encoding
/// does not depend on how many fields the type has, so a key written before
/// `ALTER TYPE ... ADD` (no bytes for the new field) and the same key
/// written after it (its new field null) are one key, as ScyllaDB and
/// Cassandra take them (cassandra_tests tuples_with_nulls_comparison_test).
/// Missing and null fields compare equal and before any value, as in
/// [`value::compare`](crate::value::compare).
fn encode_user_type<'t>(fields: impl Iterator<Item = &'t CqlType>, v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut reader = Reader::new(v);
    // The encoding's end after the last field that is not null.
    let mut end = out.len();
    for field in fields {
        if reader.is_empty() {
            break;
        }
        match reader.read_item("field").ok()? {
            None => out.push(0x01),
            Some(raw) => {
                out.push(0x02);
                encode_ascending(field, raw, out)?;
                end = out.len();
            }
        }
    }
    out.truncate(end);
    out.push(0x00);
    reader.is_empty().then_some(())
}

/// Vectors: the elements' encodings in order. Each is prefix-free and
/// their count is fixed by the type, so no separators are needed.
fn encode_vector(elem: &CqlType, dimension: u32, v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut reader = VectorReader::new(elem, v);
    for _ in 0..dimension {
        encode_ascending(elem, reader.next_element().ok()?, out)?;
    }
    reader.is_empty().then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{compare, Value};

    /// splitmix64: deterministic, so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }

        /// Few distinct bytes, so equal values and shared prefixes are common.
        fn bytes(&mut self, alphabet: &[u8], max_len: usize) -> Vec<u8> {
            let len = self.below(max_len + 1);
            (0..len).map(|_| self.pick(alphabet)).collect()
        }
    }

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).expect("test type text is valid")
    }

    /// A random valid serialized value of `ty`, biased toward edge cases.
    fn random_value(ty: &CqlType, rng: &mut Rng) -> Vec<u8> {
        let edgy = rng.below(3) == 0;
        match ty {
            CqlType::Frozen(inner) => random_value(inner, rng),
            CqlType::Ascii => rng.bytes(&[0, b'a', b'b', 0x7F], 4),
            CqlType::Text => {
                let chars = ["\0", "a", "b", "é", "\u{10FFFF}"];
                (0..rng.below(4)).map(|_| rng.pick(&chars)).collect::<String>().into_bytes()
            }
            CqlType::Blob | CqlType::Duration | CqlType::Inet if rng.below(4) == 0 => match ty {
                CqlType::Duration => Value::Duration { months: 0, days: 0, nanos: 0 }.to_bytes(),
                CqlType::Inet => rng.bytes(&[0, 1, 0xFF], 0).into_iter().chain([0, 0, 0, 0]).collect(),
                _ => Vec::new(),
            },
            CqlType::Blob => rng.bytes(&[0x00, 0x01, 0x80, 0xFF], 5),
            CqlType::Inet => {
                let len = if rng.below(2) == 0 { 4 } else { 16 };
                (0..len).map(|_| rng.pick(&[0, 1, 0xFF])).collect()
            }
            CqlType::Duration => {
                let sign = rng.pick(&[-1i64, 1]);
                let mut field = || sign * rng.pick(&[0i64, 1, 63, 64, 1 << 40]);
                Value::Duration { months: field() as i32, days: field() as i32, nanos: field() }.to_bytes()
            }
            CqlType::Boolean => vec![rng.pick(&[0, 1, 2])],
            CqlType::Tinyint => vec![rng.pick(&[0x00, 0x01, 0x7F, 0x80, 0xFF])],
            CqlType::Smallint => fixed_int(rng, edgy, 2),
            CqlType::Int => fixed_int(rng, edgy, 4),
            CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => fixed_int(rng, edgy, 8),
            CqlType::Date => fixed_int(rng, edgy, 4),
            CqlType::Time => Value::Time(rng.pick(&[0, 1, crate::value::MAX_TIME_NANOS, 86_399])).to_bytes(),
            CqlType::Float => {
                let specials =
                    [0.0, -0.0, 1.5, -1.5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::MIN_POSITIVE];
                let v = if edgy { rng.pick(&specials) } else { f32::from_bits(rng.next() as u32) };
                v.to_be_bytes().to_vec()
            }
            CqlType::Double => {
                let specials = [0.0, -0.0, 1.5, -1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -f64::NAN, f64::MAX];
                let v = if edgy { rng.pick(&specials) } else { f64::from_bits(rng.next()) };
                v.to_be_bytes().to_vec()
            }
            // Raw bytes, deliberately often non-minimal.
            CqlType::Varint => varint_bytes(rng),
            CqlType::Decimal => {
                let scale = rng.pick(&[-3i32, -1, 0, 1, 2, 5, i32::MIN, i32::MAX]);
                let scale = if edgy { scale } else { rng.below(8) as i32 - 2 };
                [scale.to_be_bytes().to_vec(), decimal_digits(rng)].concat()
            }
            CqlType::Uuid | CqlType::Timeuuid => {
                let mut u = [0u8; 16];
                u.iter_mut().for_each(|b| *b = rng.pick(&[0x00, 0x01, 0x7F, 0x80, 0xFF]));
                let version = if *ty == CqlType::Timeuuid { 1 } else { rng.pick(&[1u8, 4, 0, 15]) };
                u[6] = (u[6] & 0x0F) | (version << 4);
                u.to_vec()
            }
            CqlType::List(elem) | CqlType::Set(elem) => {
                let items: Vec<Vec<u8>> = (0..rng.below(4)).map(|_| random_value(elem, rng)).collect();
                collection(items.len(), items)
            }
            CqlType::Map(key, value) => {
                let n = rng.below(3);
                let items = (0..n).flat_map(|_| [random_value(key, rng), random_value(value, rng)]).collect();
                collection(n, items)
            }
            CqlType::Udt(udt) => random_value(&CqlType::Tuple(udt.field_types().cloned().collect()), rng),
            CqlType::Vector(elem, dimension) => {
                let items: Vec<Vec<u8>> = (0..*dimension).map(|_| random_value(elem, rng)).collect();
                let mut out = Vec::new();
                crate::vector::write(elem, items.iter().map(Vec::as_slice), &mut out);
                out
            }
            CqlType::Tuple(fields) => {
                // Sometimes fewer fields than the type has: those are null.
                let present = fields.len() - rng.below(fields.len() + 1);
                let mut out = Vec::new();
                for field in &fields[..present] {
                    match rng.below(4) {
                        0 => out.extend_from_slice(&(-1i32).to_be_bytes()),
                        _ => push_item(&mut out, &random_value(field, rng)),
                    }
                }
                out
            }
        }
    }

    fn fixed_int(rng: &mut Rng, edgy: bool, width: usize) -> Vec<u8> {
        if edgy {
            let first = rng.pick(&[0x00, 0x7F, 0x80, 0xFF]);
            let rest = rng.pick(&[0x00, 0xFF]);
            std::iter::once(first).chain(std::iter::repeat_n(rest, width - 1)).collect()
        } else {
            rng.next().to_be_bytes()[..width].to_vec()
        }
    }

    fn varint_bytes(rng: &mut Rng) -> Vec<u8> {
        let len = 1 + rng.below(4);
        (0..len).map(|_| rng.pick(&[0x00, 0x01, 0x0A, 0x7F, 0x80, 0xFF])).collect()
    }

    /// Unscaled values whose digits have inner zeros and shared prefixes
    /// (1, 10001, 1001, 12, 1201…), where a digit-packing bug would show.
    fn decimal_digits(rng: &mut Rng) -> Vec<u8> {
        if rng.below(2) == 0 {
            return varint_bytes(rng);
        }
        let magnitude = rng.pick(&[1i64, 10, 12, 101, 1001, 10001, 100_001, 1201, 12001, 99, 9901]);
        let sign = rng.pick(&[1i64, -1]);
        crate::value::bignum::minimal(&(sign * magnitude).to_be_bytes()).to_vec()
    }

    fn push_item(out: &mut Vec<u8>, item: &[u8]) {
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }

    fn collection(count: usize, items: Vec<Vec<u8>>) -> Vec<u8> {
        let mut out = (count as i32).to_be_bytes().to_vec();
        items.iter().for_each(|item| push_item(&mut out, item));
        out
    }

    fn all_types() -> Vec<CqlType> {
        [
            "ascii",
            "bigint",
            "blob",
            "boolean",
            "counter",
            "date",
            "decimal",
            "double",
            "duration",
            "float",
            "inet",
            "int",
            "smallint",
            "text",
            "time",
            "timestamp",
            "timeuuid",
            "tinyint",
            "uuid",
            "varint",
            "frozen<list<int>>",
            "frozen<set<text>>",
            "frozen<map<int, blob>>",
            "tuple<int, text, varint>",
            "frozen<list<frozen<list<decimal>>>>",
            "tuple<frozen<set<uuid>>, double>",
            "frozen<map<text, frozen<tuple<timeuuid, boolean>>>>",
            "vector<int, 2>",
            "vector<float, 3>",
            "vector<text, 2>",
            "vector<frozen<list<varint>>, 2>",
            "vector<vector<double, 2>, 2>",
        ]
        .map(ty)
        .into_iter()
        .chain([user_type()])
        .collect()
    }

    /// `frozen<addr>` with addr (street text, zip varint, tags frozen<set<int>>).
    fn user_type() -> CqlType {
        let fields = [("street", "text"), ("zip", "varint"), ("tags", "frozen<set<int>>")];
        let fields = fields.map(|(name, t)| (name.to_string(), ty(t))).to_vec();
        let udt = crate::types::UserType { keyspace: "ks".into(), name: "addr".into(), fields };
        CqlType::Frozen(Box::new(CqlType::Udt(std::sync::Arc::new(udt))))
    }

    fn enc(ty: &CqlType, v: &[u8], descending: bool) -> Vec<u8> {
        let mut out = Vec::new();
        encode(ty, v, descending, &mut out);
        out
    }

    #[test]
    fn a_user_type_key_is_the_same_before_and_after_a_field_is_added() {
        let udt = |names: &[&str]| {
            let fields = names.iter().map(|n| (n.to_string(), CqlType::Int)).collect();
            CqlType::Frozen(Box::new(CqlType::Udt(std::sync::Arc::new(crate::types::UserType {
                keyspace: "ks".into(),
                name: "ut".into(),
                fields,
            }))))
        };
        let (before, after) = (udt(&["a"]), udt(&["a", "b", "c"]));
        let value = |items: &[Option<i32>]| {
            let mut out = bytes::BytesMut::new();
            items
                .iter()
                .for_each(|i| crate::collection::put_item(&mut out, i.map(i32::to_be_bytes).as_ref().map(|b| &b[..])));
            out.to_vec()
        };
        let old = enc(&before, &value(&[Some(1)]), false);
        assert_eq!(enc(&after, &value(&[Some(1)]), false), old);
        assert_eq!(enc(&after, &value(&[Some(1), None]), false), old);
        assert_eq!(enc(&after, &value(&[Some(1), None, None]), false), old);
        // A value in a new field is another key, after the old one.
        assert!(enc(&after, &value(&[Some(1), None, Some(0)]), false) > old);
        assert!(enc(&after, &value(&[None, Some(0)]), false) < old);
    }

    #[test]
    fn generated_values_are_valid() {
        let mut rng = Rng(1);
        for t in all_types() {
            for _ in 0..300 {
                let v = random_value(&t, &mut rng);
                assert_eq!(crate::value::validate(&t, &v), Ok(()), "{t} {v:02x?}");
            }
        }
    }

    #[test]
    fn empty_values_where_encodable_sort_first_and_stay_prefix_free() {
        let mut rng = Rng(4);
        for t in all_types().into_iter().filter(encodes_empty) {
            for _ in 0..500 {
                let v = random_value(&t, &mut rng);
                for descending in [false, true] {
                    let (empty, other) = (enc(&t, &[], descending), enc(&t, &v, descending));
                    let expected = compare(&t, &[], &v);
                    let expected = if descending { expected.reverse() } else { expected };
                    assert_eq!(empty.cmp(&other), expected, "{t} {v:02x?}");
                    assert!(v.is_empty() || !other.starts_with(&empty), "{t} {v:02x?}");
                }
            }
        }
    }

    #[test]
    fn single_components_order_like_compare() {
        let mut rng = Rng(2);
        for t in all_types() {
            for _ in 0..3000 {
                let (a, b) = (random_value(&t, &mut rng), random_value(&t, &mut rng));
                let expected = compare(&t, &a, &b);
                assert_eq!(enc(&t, &a, false).cmp(&enc(&t, &b, false)), expected, "{t} asc {a:02x?} {b:02x?}");
                assert_eq!(enc(&t, &a, true).cmp(&enc(&t, &b, true)), expected.reverse(), "{t} desc {a:02x?} {b:02x?}");
            }
        }
    }

    #[test]
    fn two_component_keys_order_component_wise() {
        let mut rng = Rng(3);
        let types = all_types();
        for _ in 0..40_000 {
            let (t1, t2) = (&types[rng.below(types.len())], &types[rng.below(types.len())]);
            let (d1, d2) = (rng.below(2) == 0, rng.below(2) == 0);
            let a = (random_value(t1, &mut rng), random_value(t2, &mut rng));
            // Often share the first component so the second decides.
            let b1 = if rng.below(2) == 0 { a.0.clone() } else { random_value(t1, &mut rng) };
            let b = (b1, random_value(t2, &mut rng));
            let directed = |order: Ordering, descending: bool| if descending { order.reverse() } else { order };
            let expected = directed(compare(t1, &a.0, &b.0), d1).then(directed(compare(t2, &a.1, &b.1), d2));
            let key_a = encode_key([(t1, &a.0[..], d1), (t2, &a.1[..], d2)]);
            let key_b = encode_key([(t1, &b.0[..], d1), (t2, &b.1[..], d2)]);
            assert_eq!(key_a.cmp(&key_b), expected, "{t1} {d1} / {t2} {d2}: {a:02x?} vs {b:02x?}");
            // A prefix sorts before all its extensions.
            let prefix = encode_key([(t1, &a.0[..], d1)]);
            assert_eq!(prefix.cmp(&key_a), Ordering::Less);
            let first = directed(compare(t1, &a.0, &b.0), d1);
            assert_eq!(prefix.cmp(&key_b), if first == Ordering::Equal { Ordering::Less } else { first });
        }
    }

    #[test]
    fn descending_strings_put_prefixes_after_extensions() {
        let (ab, abc) = (enc(&CqlType::Text, b"ab", true), enc(&CqlType::Text, b"abc", true));
        assert!(ab > abc);
        let (a, a0) = (enc(&CqlType::Blob, b"a", true), enc(&CqlType::Blob, b"a\0", true));
        assert!(a > a0);
        let (a, a0) = (enc(&CqlType::Blob, b"a", false), enc(&CqlType::Blob, b"a\0", false));
        assert!(a < a0);
    }

    #[test]
    fn equal_numbers_encode_identically() {
        let decimal = |scale: i32, unscaled: &[u8]| [&scale.to_be_bytes()[..], unscaled].concat();
        let one = enc(&CqlType::Decimal, &decimal(0, &[1]), false);
        assert_eq!(enc(&CqlType::Decimal, &decimal(2, &[100]), false), one);
        assert_eq!(enc(&CqlType::Decimal, &decimal(3, &[0x03, 0xE8]), false), one);
        assert_eq!(
            enc(&CqlType::Decimal, &decimal(7, &[0]), false),
            enc(&CqlType::Decimal, &decimal(-7, &[0, 0]), false)
        );
        assert_eq!(enc(&CqlType::Varint, &[0, 0, 5], false), enc(&CqlType::Varint, &[5], false));
        assert_eq!(enc(&CqlType::Varint, &[0xFF, 0xFF], false), enc(&CqlType::Varint, &[0xFF], false));
        let nan = |bits: u32| f32::from_bits(bits).to_be_bytes();
        assert_eq!(enc(&CqlType::Float, &nan(0x7FC0_0000), false), enc(&CqlType::Float, &nan(0xFFC0_0001), false));
    }

    #[test]
    fn invalid_input_is_encoded_without_panicking() {
        let mut rng = Rng(4);
        for t in all_types() {
            for _ in 0..500 {
                let garbage = rng.bytes(&[0x00, 0x01, 0x7F, 0x80, 0xFF], 12);
                for descending in [false, true] {
                    assert!(!enc(&t, &garbage, descending).is_empty());
                }
            }
        }
    }
}
