//! Two small macros that define the C-mirroring enums and bit sets.
//!
//! Every enum and flag set of the verbs API is defined through these so that
//! each value knows its C name (without the `IBV_`/`MLX5DV_` prefix), can be
//! parsed back from it (the script runner does), and carries its numeric
//! value. Enums fed from hardware keep an `Unknown(u32)` variant so that a
//! value the crate does not know is data, never a panic.

/// Defines a C-like enum with an `Unknown(u32)` catch-all, `name()`,
/// `from_name()`, `to_raw()`, `from_raw()` and `Display` (the C name).
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $c_prefix:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr => $cname:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this crate does not know (kept, never a panic).
            Unknown(u32),
        }

        impl $name {
            /// Every known value, in declaration order.
            pub const VALUES: &'static [Self] = &[ $( Self::$variant, )* ];

            /// The C name without its prefix (`IBV_QPS_RTS` is `RTS`).
            pub fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $cname, )*
                    Self::Unknown(_) => "UNKNOWN",
                }
            }

            /// The prefix the C header puts before [`Self::name`].
            pub const C_PREFIX: &'static str = $c_prefix;

            /// Parses a C name, with or without its prefix, case-insensitively.
            pub fn from_name(s: &str) -> Option<Self> {
                let s = s.trim();
                let bare = if s.len() > $c_prefix.len()
                    && s[..$c_prefix.len()].eq_ignore_ascii_case($c_prefix)
                {
                    &s[$c_prefix.len()..]
                } else {
                    s
                };
                $( if bare.eq_ignore_ascii_case($cname) { return Some(Self::$variant); } )*
                None
            }

            /// The numeric value used by the C API.
            pub fn to_raw(self) -> u32 {
                match self {
                    $( Self::$variant => $value, )*
                    Self::Unknown(v) => v,
                }
            }

            /// Converts a C value; unknown values become `Unknown(v)`.
            pub fn from_raw(v: u32) -> Self {
                $( if v == $value { return Self::$variant; } )*
                Self::Unknown(v)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self {
                    Self::Unknown(v) => write!(f, "UNKNOWN({v})"),
                    _ => f.write_str(self.name()),
                }
            }
        }
    };
}

/// Defines a bit set over an integer with named constants, set operations,
/// `names()`/`from_names()` (`A|B|C` with C names) and `Display`.
macro_rules! c_flags {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident : $ty:ty, $c_prefix:literal {
            $( $(#[$fmeta:meta])* const $flag:ident = $value:expr => $cname:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        $vis struct $name(pub $ty);

        impl $name {
            $( $(#[$fmeta])* pub const $flag: Self = Self($value); )*

            /// Every named flag with its C name (without prefix).
            pub const NAMED: &'static [(&'static str, Self)] = &[ $( ($cname, Self::$flag), )* ];

            /// The prefix the C header puts before each flag name.
            pub const C_PREFIX: &'static str = $c_prefix;

            /// The empty set.
            pub const fn empty() -> Self { Self(0) }
            /// The raw bits.
            pub const fn bits(self) -> $ty { self.0 }
            /// The union of every named flag.
            pub const fn all_named() -> Self { Self(0 $( | $value )*) }
            /// `true` when no bit is set.
            pub const fn is_empty(self) -> bool { self.0 == 0 }
            /// `true` when every bit of `other` is set in `self`.
            pub const fn contains(self, other: Self) -> bool { self.0 & other.0 == other.0 }
            /// `true` when any bit of `other` is set in `self`.
            pub const fn intersects(self, other: Self) -> bool { self.0 & other.0 != 0 }
            /// Union.
            pub const fn union(self, other: Self) -> Self { Self(self.0 | other.0) }
            /// Intersection.
            pub const fn intersection(self, other: Self) -> Self { Self(self.0 & other.0) }
            /// Bits of `self` that are not in `other`.
            pub const fn difference(self, other: Self) -> Self { Self(self.0 & !other.0) }
            /// Bits not covered by any named flag.
            pub const fn unknown_bits(self) -> $ty { self.0 & !Self::all_named().0 }

            /// Parses `A|B|C` (C names, with or without prefix, case-insensitive),
            /// `0`, or a decimal/hex number.
            pub fn from_names(s: &str) -> Option<Self> {
                let s = s.trim();
                if s.is_empty() || s == "0" { return Some(Self(0)); }
                if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    return <$ty>::from_str_radix(hex, 16).ok().map(Self);
                }
                if s.bytes().all(|b| b.is_ascii_digit()) {
                    return s.parse::<$ty>().ok().map(Self);
                }
                let mut acc: $ty = 0;
                for part in s.split('|') {
                    let part = part.trim();
                    let bare = if part.len() > $c_prefix.len()
                        && part[..$c_prefix.len()].eq_ignore_ascii_case($c_prefix)
                    {
                        &part[$c_prefix.len()..]
                    } else {
                        part
                    };
                    if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                        acc |= <$ty>::from_str_radix(hex, 16).ok()?;
                        continue;
                    }
                    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                        acc |= part.parse::<$ty>().ok()?;
                        continue;
                    }
                    let found = Self::NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(bare))?;
                    acc |= found.1 .0;
                }
                Some(Self(acc))
            }

            /// The C names of the set bits joined by `|` (unknown bits in hex), `0` if empty.
            pub fn names(self) -> String {
                let mut out = String::new();
                let mut rest = self.0;
                for (n, f) in Self::NAMED {
                    if f.0 != 0 && self.0 & f.0 == f.0 && rest & f.0 != 0 {
                        if !out.is_empty() { out.push('|'); }
                        out.push_str(n);
                        rest &= !f.0;
                    }
                }
                if rest != 0 {
                    if !out.is_empty() { out.push('|'); }
                    out.push_str(&format!("{:#x}", rest));
                }
                if out.is_empty() { out.push('0'); }
                out
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self { Self(self.0 | rhs.0) }
        }
        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) { self.0 |= rhs.0; }
        }
        impl core::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, rhs: Self) -> Self { Self(self.0 & rhs.0) }
        }
        impl core::ops::Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self { Self(self.0 & !rhs.0) }
        }
        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(&self.names())
            }
        }
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.names())
            }
        }
    };
}
