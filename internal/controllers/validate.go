package controllers

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CheckDNSLabel returns an error naming field when value is not a DNS-1123
// label (the syntax of namespace names and revisions), nil otherwise.
func CheckDNSLabel(field, value string) error {
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		return fmt.Errorf("invalid Options.%s %q: %s", field, value, strings.Join(msgs, "; "))
	}
	return nil
}

// CheckName returns an error naming field when value is not a valid object
// name (a DNS-1123 subdomain), nil otherwise.
func CheckName(field, value string) error {
	if msgs := validation.IsDNS1123Subdomain(value); len(msgs) > 0 {
		return fmt.Errorf("invalid Options.%s %q: %s", field, value, strings.Join(msgs, "; "))
	}
	return nil
}

// CheckConfigMapKey returns an error naming field when value is not a valid
// ConfigMap data key, nil otherwise.
func CheckConfigMapKey(field, value string) error {
	if msgs := validation.IsConfigMapKey(value); len(msgs) > 0 {
		return fmt.Errorf("invalid Options.%s %q: %s", field, value, strings.Join(msgs, "; "))
	}
	return nil
}

// CheckLabelKey returns an error naming field when value is not a valid
// label key, nil otherwise.
func CheckLabelKey(field, value string) error {
	if msgs := validation.IsQualifiedName(value); len(msgs) > 0 {
		return fmt.Errorf("invalid Options.%s %q: %s", field, value, strings.Join(msgs, "; "))
	}
	return nil
}
