// placeholder: replaced by its owner before this lands
