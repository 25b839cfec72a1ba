//! Declares the durable RabbitMQ queue `orders` on 127.0.0.1:5672 (guest/guest) and publishes
//! N JSON orders to it, each confirmed by the broker: the input of
//! `examples/flows/amqp-to-postgres.yaml`.
//!
//! ```sh
//! cargo run --release --example publish_orders -- 10
//! ```
//!
//! Order `i` is `{"id":i,"name":"order-i"}`, published with routing key `orders` to the
//! default exchange, so it lands in the queue of that name.

use std::process::ExitCode;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use weir_connectors::amqp::{AmqpConfig, AmqpPublisher};

const QUEUE: &str = "orders";

async fn publish(n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let config = AmqpConfig::new("127.0.0.1:5672", "/", "guest", "guest")?;
    // ConsumeAMQP, like NiFi's, reads an existing queue: declare it (durable, so it outlives
    // a broker restart). Declaring a queue that exists with the same settings is a no-op.
    let (_connection, channel) = config.connect().await?;
    channel
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let publisher = AmqpPublisher::new(config);
    for i in 1..=n {
        let body = format!(r#"{{"id":{i},"name":"order-{i}"}}"#);
        publisher.publish("", QUEUE, body.as_bytes()).await?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|a| a.parse::<u64>()) {
        None => 10,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: publish_orders [COUNT]: COUNT must be a whole number ({e})");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("publish_orders: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(publish(n)) {
        Ok(()) => {
            println!("published {n} orders to queue `{QUEUE}`");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("publish_orders: {e}");
            ExitCode::FAILURE
        }
    }
}
