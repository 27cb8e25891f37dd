// No panic reachable from a request: it drops the connection and can leave undeletable objects.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use clap::Parser;
use keelson_apiserver::options::Command;

mod allocator;

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(allocator::collect_when_idle)
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = keelson_apiserver::Options::parse();
    if let Some(Command::Quarantine { action }) = &opts.command {
        print!(
            "{}",
            keelson_apiserver::store::quarantine::admin(&opts.data_dir, action)?
        );
        return Ok(());
    }
    if let Some(Command::Kubeconfig {
        user,
        groups,
        server,
        out,
    }) = &opts.command
    {
        let id = keelson_apiserver::kubeconfig::Identity {
            user,
            groups,
            server,
        };
        keelson_apiserver::kubeconfig::write(&opts.data_dir, &id, out)?;
        return Ok(());
    }
    if let Some(Command::Token(args)) = &opts.command {
        print!("{}", keelson_apiserver::token::run(args).await?);
        return Ok(());
    }
    if let Some(Command::EtcdPki { dir }) = &opts.command {
        keelson_apiserver::certs::ensure_etcd_pki(dir)?;
        println!("etcd PKI in {}", dir.display());
        return Ok(());
    }
    if let Some(Command::Snapshot { action }) = &opts.command {
        print!(
            "{}",
            keelson_apiserver::snapshot::command(&opts.data_dir, action).await?
        );
        return Ok(());
    }
    if let Some(Command::Certs { action }) = &opts.command {
        return certs(&opts.data_dir, action);
    }
    if let Some(Command::Migrate(args)) = &opts.command {
        let progress = |done, total| eprintln!("copied {done}/{total} objects");
        let report = keelson_apiserver::migrate::run(args, progress).await?;
        println!("{report}");
        println!(
            "start keelson-apiserver with the same --data-dir and --etcd-servers to serve them"
        );
        return Ok(());
    }
    keelson_apiserver::run(opts).await?;
    Ok(())
}

/// `certs check` and `certs renew` over the data directory and the given directories.
fn certs(
    data_dir: &std::path::Path,
    action: &keelson_apiserver::options::CertsAction,
) -> anyhow::Result<()> {
    use keelson_apiserver::certs_admin;
    use keelson_apiserver::options::CertsAction;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let with_data = |dirs: &[std::path::PathBuf]| {
        let mut all = vec![data_dir.to_path_buf()];
        all.extend(dirs.iter().cloned());
        all
    };
    match action {
        CertsAction::Check { within, dirs } => {
            let (table, ok) = certs_admin::check(&with_data(dirs), *within, now)?;
            print!("{table}");
            if !ok {
                anyhow::bail!(
                    "a certificate is unreadable or expires within {within} days: run `certs renew`"
                );
            }
        }
        CertsAction::Renew { dirs } => {
            let read = |f: &str| std::fs::read_to_string(data_dir.join(f));
            let ca = (read("ca.crt")?, read("ca.key")?);
            for line in certs_admin::renew(&with_data(dirs), &ca, now)? {
                println!("{line}");
            }
        }
    }
    Ok(())
}
