"""Layer 4, the plugins: samplers, graders, reward models, verifiers and training objectives; each
builds on core, metrics and api only, and no plugin package imports another."""
