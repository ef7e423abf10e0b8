def dispatch(model, batch):
    return model(batch)
