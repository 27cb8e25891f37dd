use clap::Parser;
use keelson_apiserver::options::Command;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = keelson_apiserver::Options::parse();
    if let Some(Command::Quarantine { action }) = &opts.command {
        print!(
            "{}",
            keelson_apiserver::store::quarantine::admin(&opts.data_dir, action)?
        );
        return Ok(());
    }
    keelson_apiserver::run(opts).await?;
    Ok(())
}
