//! Client certificates: the TLS layer has verified the chain to the client CA; the user is the
//! subject's CommonName and the groups its Organization values, as kube-apiserver's x509
//! authenticator reads them.

use super::User;

/// The user a verified leaf certificate (DER) names; None when it has no CommonName.
pub fn user(der: &[u8]) -> Option<User> {
    let id = keelson_daemon::subject_identity(der)?;
    Some(User {
        name: id.user,
        uid: String::new(),
        groups: id.groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert(cn: Option<&str>, orgs: &[&str]) -> Vec<u8> {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            p.distinguished_name.push(DnType::CommonName, cn);
        }
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        let key = KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn common_name_and_organizations() {
        // (rcgen keeps one value per attribute type; several O values were checked with
        // openssl-made certificates against the running server.)
        let u = user(&cert(Some("system:node:n1"), &["system:nodes"])).unwrap();
        assert_eq!(u.name, "system:node:n1");
        assert_eq!(u.groups, ["system:nodes"]);
        assert_eq!(user(&cert(None, &["system:masters"])), None);
        assert_eq!(user(b"not der"), None);
    }
}
