pub use rabbitmq_stream_protocol::commands::subscribe::OffsetSpecification;
