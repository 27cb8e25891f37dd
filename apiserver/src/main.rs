use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    keelson_apiserver::run(keelson_apiserver::Options::parse()).await?;
    Ok(())
}
