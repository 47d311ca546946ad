package assertions

func Holds() bool { return true }
