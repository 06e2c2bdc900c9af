import PushMedia

/// Entry points for fuzzing (placeholder until the targets are written).
public enum FuzzTargets {}
