//! Protocol buffer wire format: tags, varints, length-delimited and fixed-width values.
//!
//! Only reading is needed: the API server receives protobuf bodies and answers in JSON.

/// The wire types a field key can announce (groups, types 3 and 4, are not used by Kubernetes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl WireType {
    pub fn name(self) -> &'static str {
        match self {
            WireType::Varint => "varint",
            WireType::Fixed64 => "fixed64",
            WireType::Len => "length-delimited",
            WireType::Fixed32 => "fixed32",
        }
    }
}

/// Low-level failures; the decoder adds which message and field they happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ended inside a value.
    Truncated,
    /// A varint ran over 10 bytes.
    VarintTooLong,
    /// A key announced wire type 3, 4, 6 or 7.
    UnsupportedWireType(u8),
    /// A key with field number 0.
    ZeroFieldNumber,
}

/// A cursor over one message's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = *self.buf.get(self.pos).ok_or(WireError::Truncated)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::VarintTooLong)
    }

    /// Reads a field key: (field number, wire type).
    pub fn key(&mut self) -> Result<(u32, WireType), WireError> {
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            other => return Err(WireError::UnsupportedWireType(other as u8)),
        };
        let number = u32::try_from(key >> 3).map_err(|_| WireError::VarintTooLong)?;
        if number == 0 {
            return Err(WireError::ZeroFieldNumber);
        }
        Ok((number, wire))
    }

    /// Reads a length prefix and returns that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
        self.take(len)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(len).ok_or(WireError::Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// Skips a value of the given wire type (fields the schema does not know).
    pub fn skip(&mut self, wire: WireType) -> Result<(), WireError> {
        match wire {
            WireType::Varint => self.varint().map(|_| ()),
            WireType::Fixed64 => self.take(8).map(|_| ()),
            WireType::Len => self.bytes().map(|_| ()),
            WireType::Fixed32 => self.take(4).map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_including_multibyte_and_negative_int32() {
        let mut r = Reader::new(&[0x00, 0x96, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(r.varint(), Ok(0));
        assert_eq!(r.varint(), Ok(150));
        assert_eq!(r.varint(), Ok(0xffff_ffff));
        assert!(r.is_empty());
        // Go encodes int32(-1) as a ten-byte varint of the sign-extended value.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(r.varint().map(|v| v as i64 as i32), Ok(-1));
    }

    #[test]
    fn truncated_and_overlong_varints_are_errors() {
        assert_eq!(Reader::new(&[0x96]).varint(), Err(WireError::Truncated));
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(WireError::VarintTooLong)
        );
    }

    #[test]
    fn keys_split_number_and_wire_type() {
        let mut r = Reader::new(&[0x0a, 0x10, 0x91, 0x01]);
        assert_eq!(r.key(), Ok((1, WireType::Len)));
        assert_eq!(r.key(), Ok((2, WireType::Varint)));
        assert_eq!(r.key(), Ok((18, WireType::Fixed64)));
        assert_eq!(
            Reader::new(&[0x0b]).key(),
            Err(WireError::UnsupportedWireType(3))
        );
        assert_eq!(Reader::new(&[0x02]).key(), Err(WireError::ZeroFieldNumber));
    }

    #[test]
    fn length_delimited_values_are_bounds_checked() {
        let mut r = Reader::new(&[0x03, b'a', b'b', b'c', 0x05, b'x']);
        assert_eq!(r.bytes(), Ok(&b"abc"[..]));
        assert_eq!(r.bytes(), Err(WireError::Truncated));
    }

    #[test]
    fn skip_handles_every_wire_type() {
        let mut r = Reader::new(&[0x96, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x01, 0xaa, 1, 2, 3, 4]);
        r.skip(WireType::Varint).unwrap();
        r.skip(WireType::Fixed64).unwrap();
        r.skip(WireType::Len).unwrap();
        r.skip(WireType::Fixed32).unwrap();
        assert!(r.is_empty());
        assert_eq!(
            Reader::new(&[1, 2]).skip(WireType::Fixed32),
            Err(WireError::Truncated)
        );
    }
}
