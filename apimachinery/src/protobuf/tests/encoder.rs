//! A tiny protobuf writer for building test bodies field by field.

/// Builds one message; nested messages are built separately and added with `msg`.
#[derive(Default, Clone)]
pub struct Enc(Vec<u8>);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Enc {
    pub fn new() -> Self {
        Enc::default()
    }

    fn key(mut self, number: u32, wire: u8) -> Self {
        varint(&mut self.0, (u64::from(number) << 3) | u64::from(wire));
        self
    }

    pub fn varint(self, number: u32, v: u64) -> Self {
        let mut e = self.key(number, 0);
        varint(&mut e.0, v);
        e
    }

    /// An int32 or int64 as Go writes it: negative values sign-extended to 64 bits.
    pub fn int(self, number: u32, v: i64) -> Self {
        self.varint(number, v as u64)
    }

    pub fn bytes(self, number: u32, b: &[u8]) -> Self {
        let mut e = self.key(number, 2);
        varint(&mut e.0, b.len() as u64);
        e.0.extend_from_slice(b);
        e
    }

    pub fn str(self, number: u32, s: &str) -> Self {
        self.bytes(number, s.as_bytes())
    }

    pub fn msg(self, number: u32, m: Enc) -> Self {
        self.bytes(number, &m.0)
    }

    pub fn fixed32(mut self, number: u32, v: u32) -> Self {
        self = self.key(number, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn fixed64(mut self, number: u32, v: u64) -> Self {
        self = self.key(number, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// One entry of a `map<string, string>` field.
    pub fn entry(self, number: u32, key: &str, value: &str) -> Self {
        self.msg(number, Enc::new().str(1, key).str(2, value))
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Wraps an object's message in the `k8s\0` + runtime.Unknown envelope, as client-go does.
pub fn envelope(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
    envelope_raw(api_version, kind, &raw.finish())
}

/// Like `envelope`, for hand-made (e.g. deliberately broken) object bytes.
pub fn envelope_raw(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, api_version).str(2, kind))
        .bytes(2, raw)
        .str(3, "")
        .str(4, "");
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.finish());
    body
}

/// ObjectMeta with a name, the other value fields empty as Go sends them.
pub fn meta(name: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .varint(7, 0)
        .msg(8, Enc::new())
}
