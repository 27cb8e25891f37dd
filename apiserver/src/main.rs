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
