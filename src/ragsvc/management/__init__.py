"""What AdminService manages, apart from the transport: custom prompt templates and the ranking weights."""
