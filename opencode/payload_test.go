package opencode

import "testing"

// Each payload names its own event type: a copied EventType method that
// still names another type would send one event's data under another's name.
func TestPayloadTypesDistinct(t *testing.T) {
	payloads := []Payload{PromptAdmitted{}, Prompted{}, AgentSwitched{}, ModelSwitched{}, StepStarted{}, StepEnded{},
		StepFailed{}, TextStarted{}, TextDelta{}, TextEnded{}, ReasoningStarted{}, ReasoningDelta{}, ReasoningEnded{},
		ToolInputStarted{}, ToolInputDelta{}, ToolInputEnded{}, ToolCalled{}, ToolSuccess{}, ToolFailed{},
		InboxEnqueued{}, InboxDelivered{}, InboxCancelled{}, InboxDeliveryChanged{}, InboxReplaced{},
		SessionCreated{}, SessionUpdated{}, SessionDeleted{}, SessionStatus{}, SessionIdle{}, SessionCompacted{},
		SessionError{}, SessionDiff{}, CommandExecuted{}, MessageUpdated{}, MessageRemoved{}, PartUpdated{},
		PartDelta{}, PartRemoved{}, TodoUpdated{}, PermissionRequest{}, PermissionReplied{}, QuestionRequest{},
		QuestionReplied{}, QuestionRejected{}}
	seen := map[string]Payload{}
	for _, p := range payloads {
		typ := p.EventType()
		if prev, ok := seen[typ]; ok {
			t.Errorf("%T and %T both say they are %s", prev, p, typ)
		}
		seen[typ] = p
	}
	if v := EventVersion(StepEnded{}); v != 2 {
		t.Errorf("step.ended version %d, want 2", v)
	}
	if v := EventVersion(StepStarted{}); v != 1 {
		t.Errorf("step.started version %d, want 1", v)
	}
}
