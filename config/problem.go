package config

// Problem is a problem of field (a path such as rules[0].subject) as Load and
// CheckSweeper report theirs: placed at the field in File, or at its closest
// ancestor when the file does not give the field (no place when the Config
// was not read from a file). It is for what only another package can check,
// such as a rule's template that parses but fails when executed (see
// alerts.CheckRules).
func (c *Config) Problem(field, msg string) *FieldError { return c.problem(field, msg) }
