//! Numbers and addresses appended to a report row as `core::fmt` would write them, without
//! its machinery: the stats thread writes up to hundreds of thousands of rows a second on a
//! busy fabric (transmissions of two packets or more were 300,000 a second on the
//! benchmark's many-QP traffic at 6 Mpps), and `write!` spent more time there than anything
//! else it does (padding, the formatter's dispatch, and `{:.6}` floats through exact
//! decimal expansion).
//! Each function writes exactly what the `format!` spelling in its comment does; the tests
//! check that against `format!` itself.

use std::fmt::Write as _;
use std::net::IpAddr;

/// `{v}` of a `u64`.
pub fn push_u64(out: &mut String, v: u64) {
    push_padded(out, v, 1);
}

/// `{v:0width$}` of a `u64` (at most 20 digits are written for the value itself).
pub fn push_padded(out: &mut String, mut v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for _ in buf.len() - at..width {
        out.push('0');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[at..]).unwrap_or_default());
}

/// `{x:.6}` of an `f64`: the value rounded to six decimals, ties to even, as `core::fmt`
/// rounds the exact binary value. Finite values from +0 to 2^44 (every rate and ratio a
/// report writes) are done here with integer arithmetic; any other (-0 and negative ones
/// too) goes to `write!`.
pub fn push_fixed6(out: &mut String, x: f64) {
    const SCALE: u128 = 1_000_000;
    if !(x.is_finite() && x.is_sign_positive() && x < (1u64 << 44) as f64) {
        let _ = write!(out, "{x:.6}");
        return;
    }
    // x = m * 2^e exactly, m < 2^53.
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 { (frac, -1074) } else { (frac | (1u64 << 52), exp - 1075) };
    // x * 10^6 = m * 10^6 * 2^e, rounded to an integer, ties to even.
    let scaled = u128::from(m) * SCALE;
    let micros = if e >= 0 {
        // Below 2^44, so e is small here.
        scaled << e
    } else {
        let s = (-e) as u32;
        if s >= 127 {
            // m * 10^6 < 2^73: less than half of one.
            0
        } else {
            let q = scaled >> s;
            let r = scaled & ((1u128 << s) - 1);
            let half = 1u128 << (s - 1);
            if r > half || (r == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    push_u64(out, (micros / SCALE) as u64);
    out.push('.');
    push_padded(out, (micros % SCALE) as u64, 6);
}

/// `{ip}` of an address (IPv4 here; IPv6, with its zero-run rules, by `write!`).
pub fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            for (i, o) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_u64(out, u64::from(o));
            }
        }
        IpAddr::V6(_) => {
            let _ = write!(out, "{ip}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via<T>(f: impl Fn(&mut String, T), v: T) -> String {
        let mut s = String::new();
        f(&mut s, v);
        s
    }

    #[test]
    fn integers_as_format_writes_them() {
        for v in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            assert_eq!(via(push_u64, v), format!("{v}"));
            for w in [0, 1, 2, 6, 9, 25] {
                assert_eq!(via(|s, v| push_padded(s, v, w), v), format!("{v:0w$}"));
            }
        }
    }

    #[test]
    fn fixed_six_decimals_as_format_writes_them() {
        let mut values = vec![
            0.0,
            1e-7,
            4e-7,
            5e-7,
            5.000001e-7,
            1.5e-6,
            2.5e-6,
            0.1,
            0.5,
            0.333_333_5,
            0.999_999_5,
            1.0,
            9.999_999_5,
            123.456_789_5,
            1e6,
            (1u64 << 44) as f64 - 1.0,
            (1u64 << 44) as f64,
            1e300,
            f64::MIN_POSITIVE,
            5e-324,
            -0.0,
            -1.25,
            f64::NAN,
            f64::INFINITY,
        ];
        // The exact ties at the sixth decimal: x * 10^6 = n + 1/2 makes x = (2n + 1) /
        // (2^7 * 5^6), a binary fraction only for the odd multiples of 1/128 (0.0078125,
        // 0.0234375, ...), rounded down and up in turn; values next to a tie that binary
        // cannot hold ((2k + 1) / 2,000,000) and to a 2^-21 grid; then a spread of ordinary
        // values (a fixed xorshift sequence).
        for k in 0..2_000u64 {
            values.push((2 * k + 1) as f64 / 128.0);
            values.push((2 * k + 1) as f64 / 2_000_000.0);
            values.push((k as f64 + 0.5) / 1_048_576.0);
        }
        let mut r = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
            values.push(unit);
            values.push(unit * 1e3);
            values.push(unit * 1e-4);
            values.push((r % 10_000_000) as f64 / 1e6);
            values.push(f64::from_bits(r >> 2));
        }
        for x in values {
            assert_eq!(via(push_fixed6, x), format!("{x:.6}"), "{x:e}");
        }
        // By hand: 1/128 * 10^6 = 7,812.5 goes to the even 7,812; 3/128 * 10^6 = 23,437.5
        // to 23,438.
        assert_eq!(via(push_fixed6, 1.0 / 128.0), "0.007812");
        assert_eq!(via(push_fixed6, 3.0 / 128.0), "0.023438");
    }

    #[test]
    fn addresses_as_display_writes_them() {
        for ip in ["0.0.0.0", "10.20.48.1", "255.255.255.255", "192.168.100.9", "fd00::1", "::ffff:1.2.3.4"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(via(push_ip, ip), ip.to_string());
        }
    }
}
