package opencode

// SteerRefusal is why the core did not admit a steer aimed at the turn of
// one input ("": admitted). The OpenAI door answers each with its own
// response.steer.failed code.
type SteerRefusal string

const (
	// SteerTurnOver: the input's turn has ended (or it was revoked): no
	// running turn of it to steer.
	SteerTurnOver SteerRefusal = "turn_over"
	// SteerNotStarted: the input still waits in the inbox; its turn has
	// not begun.
	SteerNotStarted SteerRefusal = "not_started"
	// SteerSuperseded: the turn runs, but a later input was delivered into
	// it: that one is the turn's current input, the one to steer.
	SteerSuperseded SteerRefusal = "superseded"
	// SteerUnsupported: the turn's agent takes no steers (an external
	// agent that does not advertise steering).
	SteerUnsupported SteerRefusal = "unsupported"
	// SteerTooMany: the session already holds MaxPendingSteers steers
	// not yet delivered.
	SteerTooMany SteerRefusal = "too_many"
)

// MaxPendingSteers bounds the steers aimed at one input's turn that wait
// for its next model call (SteerInto).
const MaxPendingSteers = 16
