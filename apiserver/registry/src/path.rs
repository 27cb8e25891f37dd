//! Field paths in upstream's notation: `spec.containers[0].resources.limits[cpu]`.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Path(String);

impl Path {
    pub fn root() -> Path {
        Path(String::new())
    }

    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{}", self.0, name))
        }
    }

    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{}]", self.0, i))
    }

    pub fn key(&self, k: &str) -> Path {
        Path(format!("{}[{}]", self.0, k))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn renders_like_upstream() {
        let p = Path::root().child("spec").child("containers").index(0);
        assert_eq!(p.child("image").to_string(), "spec.containers[0].image");
        assert_eq!(p.key("cpu").to_string(), "spec.containers[0][cpu]");
    }
}
